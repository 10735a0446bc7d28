#!/usr/bin/env bash
# Session 53: the GEMM epilogue loads every channel's scale and bias before using any (write_output_tile_at). ncu
# source counters of gpt-oss-120b GEMM2 at M = 640 (32x512/1x8x1/8/p/t, H100, call 3) put ~6% of the consumer warps'
# stall samples on the uses of the f32 bias, loaded one (nt, r) pair at a time: eight global-load latencies an epilogue.
# Prediction: gpt-oss-120b (the only preset with a bias) GEMMs -2% to -5% at M = 256-1024 where one CTA an SM waits
# through its epilogue, less at small M; layers without a bias unchanged (same loads, none taken).
#  tests: GPU tests of every GEMM body's epilogue (MoeGemmGpu on the named tiles, every scheme, bf16 and f32 bias; the
#         layer tests with bias, persistent and MMA-order tiles, the tuning tables), then `moeq verify` of gpt-oss-120b.
#  time:  GEMM1 / GEMM2 of gpt-oss-120b (shipped table) and whole steps, OLD (9cb3a37) against BUILD, O N N O; a
#         Qwen3-30B-A3B MXFP4 control (no bias).
#  check: after calls 5-6 the loads-first epilogue became the kernels' of weights with a bias only (Cfg::kBias; the
#         others' machine code is 9cb3a37's again, and the bias kernels' that of calls 5-6, cuobjdump here): the bias
#         GPU tests call 5 did not reach or that name a bias, `moeq verify` of gpt-oss-120b, then `time`.
# Usage: s53_bias_epilogue.sh tests|time|check BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
old_build="$3"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$part" = tests ]; then
  export MOEQ_TEST_TILES="8x64/1x4x1/2/r 16x128/1x4x1/2/r 24x256/1x8x1/4/o2/p/t 32x512/1x8x1/8/p/t 48x512/1x8x1/6/p/t 96x256/1x8x1/4/p/s/t 128x256/1x8x1/4/p 64x128/2x2x1/4"
  filtered_gpu_tests 'MoeGemmGpu.*:ExpertsGpu.OddShapesExpertMapAndBias:ExpertsGpu.TuningTableTilesMatchOracle:ExpertsGpu.PersistentTilesMatchOracle:ExpertsGpu.MmaOrderTilesMatchOracle:ExpertsGpu.DirectTilesOf24And32RowsMatchOracle' 420
  layer_verify "gpt-oss-120b mxfp4 1 16 256 640"
elif [ "$part" = check ]; then
  export MOEQ_TEST_TILES="8x64/1x4x1/2/r 32x512/1x8x1/8/p/t"
  filtered_gpu_tests 'ExpertsGpu.OddShapesExpertMapAndBias:MoeGemmGpu.ActivationEpilogueEqualsGemm1ThenActivation:MoeGemmGpu.SelfRoutedGemm1EqualsTheRoutedOne:MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct:MoeGemmGpu.WideTilesStageMxScalesWithTheSameProducts' 240
  layer_verify "gpt-oss-120b mxfp4 16 640"
fi
if [ "$part" = time ] || [ "$part" = check ]; then
  # time: the planner's tiles (bench's default); check: the shipped table's.
  table=""
  [ "$part" = check ] && table="--tuning $(cd "$(dirname "$0")/../.." && pwd)/tuning/sm_90/gpt-oss-120b_mxfp4.json"
  for who in O N N O; do
    bin="$build/moeq"
    [ "$who" = O ] && bin="$old_build/moeq"
    # shellcheck disable=SC2086
    timeout 120 "$bin" bench --trials 7 --kernel gemm1 gemm2 $table --preset gpt-oss-120b --scheme mxfp4 -M 16 256 640 1024 \
      2>&1 | grep -E "^gemm[12] " | sed "s/^/$who /" >>"$out/gemms.txt"
    echo "gemms $who $(($(date +%s) - t0)) s"
  done
  layer_steps shipped gpt-oss-120b mxfp4 "1 16 256 640 1024" "O N N O"
  layer_steps shipped qwen3-30b-a3b mxfp4 "16 256" "O N N O"
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
