#!/usr/bin/env bash
# Session 15, call F: FP8-block's 8-row direct tile 4 deep (uncapped, 164 registers, 3 CTAs per SM; its pairs
# issued together since GEMM v16) against the planner's 2-deep tile, timing only (call D's MoeGemmGpu covered
# 8x128/1x4x1/4/r for every scheme).
# Usage: v16_fp8_depth.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tiles="8x128/1x4x1/2/r 8x128/1x4x1/4/r"
warm_tiles "fp8-block" "$tiles"
for p in "qwen3-30b-a3b|8 16 24 32 48 64" "gpt-oss-120b|16 64" "deepseek-v3|16"; do
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "${p%%|*}" --scheme fp8-block \
    -M ${p#*|} --tile $tiles >>"$out/sweep.txt" 2>&1
  echo "bench ${p%%|*} rc=$? $(($(date +%s) - t0)) s"
done
