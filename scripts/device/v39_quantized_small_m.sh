#!/usr/bin/env bash
# Issue 5's side-by-side at the end of session 24: MXFP4 weights with bf16 against FP8 per-token activations,
# Qwen3-30B-A3B and DeepSeek-V3, M = 16, 256 and 4096 (default plans: shipped tables, prepared codes), two rounds.
# Usage: v39_quantized_small_m.sh BUILD   (env OUT; kernels compiled on the workstation into .cache-device)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
layer_rounds 2 --preset qwen3-30b-a3b deepseek-v3 --scheme mxfp4 mxfp4:fp8-token -M 16 256 4096
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
