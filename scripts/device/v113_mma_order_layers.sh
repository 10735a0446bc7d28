#!/usr/bin/env bash
# Session 39, call 2: the `/t` plumbing on the GPU (the activation's MMA-order output, order_rows_for_mma, whole
# layers against the oracle in the three layouts, the warm-up), then whole steps with the shipped tables (O) against
# the same tables with every warp-specialized entry on its `/t` twin (N), O N N O.
# Usage: v113_mma_order_layers.sh BUILD   (env OUT, MOEQ_CACHE_DIR; the N tables in $MOEQ_CACHE_DIR/tables113)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tables="$MOEQ_CACHE_DIR/tables113"
timeout 200 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.MmaOrderTilesMatchOracle:ElementwiseGpu.MmaOrder*:MoeGemmGpu.MmaOrderTokens*' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|differs|rel " "$out/gpu_tests.txt" | head -30
timeout 150 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED|  OK) |^\[       OK|Failure" "$out/warmup.txt" | head
export STEPS_DEADLINE=560
steps_old_new qwen3-30b-a3b mxfp4 "1024 4096" "$tables/qwen3-30b-a3b_mxfp4.json" steps.txt
steps_old_new gpt-oss-120b mxfp4 "1024 2048 4096" "$tables/gpt-oss-120b_mxfp4.json" steps.txt
steps_old_new qwen3-30b-a3b int4-g128 "1024 4096" "$tables/qwen3-30b-a3b_int4-g128.json" steps.txt
steps_old_new qwen3-30b-a3b mxfp4 "512 2048" "$tables/qwen3-30b-a3b_mxfp4.json" steps.txt
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
