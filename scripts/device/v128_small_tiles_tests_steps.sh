#!/usr/bin/env bash
# Session 40, call 3. (1) GPU tests of the 16-32-row `/p/t` tiles: the candidate test on them (all 12 of its schemes,
# where legal), the quantized activation pairs and MMA-order layers against the oracle, the folded quantizer, the
# warm-up test (kernels packed here). (2) Whole steps at ~24 rows per expert, where call 2 timed `32x512/1x8x1/8/p/t`
# 14% / 8% under the planner's `32x128/1x8x1/4/o3` (Qwen3 MXFP4 M = 384): O (shipped: the planner there) N (an entry
# (2560, 3072] routed rows on the 32-row `/t` tile, $MOEQ_CACHE_DIR/tables128) N O.
# Usage: v128_small_tiles_tests_steps.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tiles="16x512/1x8x1/8/p/t 24x256/1x8x1/8/p/t 24x512/1x8x1/6/p/t 24x512/1x8x1/8/p/t 24x512/1x8x1/6/p/s/t 32x512/1x8x1/8/p/t"
MOEQ_TEST_TILES="$tiles" timeout 170 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.EveryTile*:ExpertsGpu.QuantizedActivationPairsMatchOracle:ExpertsGpu.MmaOrderTilesMatchOracle:FoldedQuantizerGpu.*' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -30
grep -E "^\[       OK" "$out/gpu_tests.txt" | sed 's/^/  /'
export STEPS_DEADLINE=320
tables="$MOEQ_CACHE_DIR/tables128"
steps_old_new qwen3-30b-a3b mxfp4 "384 352" "$tables/qwen3-30b-a3b_mxfp4.json" steps.txt
steps_old_new gpt-oss-120b mxfp4 "768" "$tables/gpt-oss-120b_mxfp4.json" steps.txt
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
timeout $((350 - ($(date +%s) - t0))) "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) " "$out/warmup.txt"
