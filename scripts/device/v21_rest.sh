#!/usr/bin/env bash
# GEMM v21, the rest of the proof: MoeGemmGpu on the other one-K-group direct tiles whose pass ring
# changed (candidates the planner does not pick), the GPU tests not run in v21_fold.sh, the warm-up
# test; then the planner's MXFP4 picks at the M that call did not time, against BINS/moeq_base on
# v20's pick (8x128/1x4x1/4/r).
# Usage: v21_rest.sh BUILD BINS   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
warm_tiles "int4-g128 mxfp4 mxfp8" "8x256/1x8x1/4/r 8x64/1x4x1/2/r 8x256/1x4x1/2/r"
gpu_tests "8x256/1x8x1/4/r 8x64/1x4x1/2/r 8x256/1x4x1/2/r" '-ExpertsGpu.*' 200
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/warmup.txt")"
timeout 50 "$bins/moeq_base" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 \
  -M 4 10 12 24 48 --tile 8x128/1x4x1/4/r >"$out/base.txt" 2>&1
timeout 50 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 \
  -M 4 10 12 24 48 >"$out/new.txt" 2>&1
echo "done $(($(date +%s) - t0)) s"
