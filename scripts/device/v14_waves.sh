#!/usr/bin/env bash
# Session 13, call B: is Qwen3's small-M GEMM1 bound by wave quantization? GEMM1 and GEMM2 of the
# 8-row direct tile over a fine sweep of M (the CTA count crosses whole waves of resident CTAs at
# different M), the few-rows tiles at M = 1, 2, 4, MoeGemmGpu on the new few-rows tile, and ncu of
# one launch at M = 8 (under one wave) and M = 16 (1.5 waves).
# Usage: v14_waves.sh MOEQ_BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tiles="8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x64/1x2x2/4/r"
warm_tiles "int4-g128 mxfp4 fp8-block" "$tiles"
MOEQ_TEST_TILES="8x64/1x2x2/2/r" timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
for round in 1 2; do
  for s in int4-g128 mxfp4; do
    timeout 150 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme $s \
      -M 4 6 8 10 12 14 16 20 24 28 32 40 48 56 64 --tile 8x128/1x4x1/2/r >>"$out/bench$round.txt" 2>&1
    echo "sweep $round $s rc=$? $(($(date +%s) - t0)) s"
  done
  for s in int4-g128 mxfp4 fp8-block; do
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme $s -M 1 2 4 \
      --tile $tiles >>"$out/bench$round.txt" 2>&1
    echo "few $round $s rc=$? $(($(date +%s) - t0)) s"
  done
done
OUT="$out" bash "$(dirname "$0")/ncu_gemm.sh" "$build/moeq" "qwen3-30b-a3b int4-g128 8 gemm1 8x128/1x4x1/2/r" \
  "qwen3-30b-a3b int4-g128 16 gemm1 8x128/1x4x1/2/r"
echo "done $(($(date +%s) - t0)) s"
