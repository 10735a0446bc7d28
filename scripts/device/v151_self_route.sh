#!/usr/bin/env bash
# The first GPU run of docs/experiments/2026-12-05-self-routed-gemm1.patch: at the smallest M (route_fused, at most 8
# slots; 16-bit activations, a direct GEMM1 tile) GEMM1 finds its block rows from topk_ids itself and streams its
# weights while route_fused runs; route_fused waits for its predecessor before it lets GEMM1 launch. First the GPU
# tests that route at small M; then whole steps O N N O in one binary, O with MOEQ_SELF_ROUTE=0; then `moeq verify`.
# The patch changes MoeGemmParams, so no GEMM kernel comes from the v136 pack: warm the layers first (16 processes).
# Prediction: -2 to -5 us a step where it applies (session 33: route_fused ~5.5 us of graph time at Qwen3 M = 1, in a
# 25 us step); Qwen3 M = 2 (16 slots: the two-kernel routing, not self-routed) unchanged.
# Usage: v151_self_route.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
warm_layers "qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b" "mxfp4"
warm_layers "tiny" "mxfp4 int4-g128 fp8-block nvfp4"
timeout 240 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.SelfRouted*:ExpertsGpu.OddShapesExpertMapAndBias:ExpertsGpu.BadRoutingValues*:ExpertsGpu.GraphCapture*:ExpertsGpu.EveryFormatEveryLayoutMatchesOracle' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | head -12
steps() {  # PRESET "M ...": O (MOEQ_SELF_ROUTE=0) N N O into steps.txt
  for who in O N N O; do
    flag=1
    [ "$who" = O ] && flag=0
    # shellcheck disable=SC2086
    MOEQ_SELF_ROUTE=$flag timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset "$1" --scheme mxfp4 -M $2 \
      >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" '{print w, $2, $3, $4, $5, $6, $8}' >>"$out/steps.txt"
    grep -E "^copy" "$out/o.tmp" | head -1
  done
  echo "steps $1 $(($(date +%s) - t0)) s"
}
steps qwen3-30b-a3b "1 2"
steps gpt-oss-120b "1 2"
steps deepseek-v3 "1"
steps mixtral-8x7b "1 2 4"
for job in "qwen3-30b-a3b 1 2" "gpt-oss-120b 1 2" "mixtral-8x7b 1 4"; do
  # shellcheck disable=SC2086
  set -- $job
  p="$1"
  shift
  timeout 90 "$build/moeq" verify --preset "$p" --scheme mxfp4 --activation silu -M "$@" >>"$out/verify.txt" 2>&1
  echo "verify $p rc=$? $(($(date +%s) - t0)) s"
done
grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
echo "done $(($(date +%s) - t0)) s"
