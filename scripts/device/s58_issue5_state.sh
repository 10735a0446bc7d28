#!/usr/bin/env bash
# Issue 5's side by side on today's code (last measured in session 39: +5.4% / +7.8% / +1.0% at M = 16 / 256 / 4096):
# MXFP4 weights with FP8 per-token activations against bf16 activations, whole steps (shipped tables, CUDA graphs,
# weights rotated past the L2), Qwen3-30B-A3B and DeepSeek-V3, M = 16 / 256 / 4096, in the order bf16 fp8 fp8 bf16
# (two processes each, so the spread between processes shows). Packs: s57_pack.txt and s58_issue5_pack.txt.
# Prediction: unchanged from session 39 within ~2% (no quantized-activation kernel changed since; the bf16 steps gained
# the activation epilogue in sessions 55-56, which may widen the gap at M = 16 / 256).
# Usage: s58_issue5_state.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for round in 1 2; do
  for scheme in $([ $round = 1 ] && echo "mxfp4 mxfp4:fp8-token" || echo "mxfp4:fp8-token mxfp4"); do
    timeout 150 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b deepseek-v3 --scheme "$scheme" \
      -M 16 256 4096 >>"$out/issue5_layers.txt" 2>&1
    echo "issue 5 round $round $scheme rc=$? $(($(date +%s) - t0)) s"
  done
done
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
