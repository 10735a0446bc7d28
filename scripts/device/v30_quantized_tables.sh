#!/usr/bin/env bash
# Quantized-activation layers planned with their weights' 16-bit shipped table (plan::shipped_tuning's
# fallback) against the planner's rules (--no-shipped-tuning), Qwen3 MXFP4 with FP8 per-token,
# MXFP8 and MXFP4 activations, M = 16 .. 4096, two rounds in swapped order; bf16 in the same runs.
# Usage: v30_quantized_tables.sh BUILD   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
for flag in "" --no-shipped-tuning --no-shipped-tuning ""; do
  # shellcheck disable=SC2086
  timeout 100 "$build/moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 -M 16 64 256 1024 4096 $flag >>"$out/layer.txt" 2>&1
  echo "layer '$flag' rc=$? $(($(date +%s) - t0)) s"
  grep -E "^layer  qwen" "$out/layer.txt" | tail -20 | awk '{print $3, $4, $5}' | paste -sd' '
done
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
