#!/usr/bin/env bash
# Session 39, call 10: the planner's `/t` tiles in whole layers: ExpertsGpu.EveryFormatEveryLayoutMatchesOracle (11
# weight schemes x 3 activations x 3 layouts x M = 1, 7, 129: M = 129 runs the 48- and 64-row warp-specialized tiles,
# now `/t`, and their twins on the masked layout's GEMM1) on the final build.
# Usage: v121_planner_layers.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
timeout 280 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.EveryFormatEveryLayoutMatchesOracle' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -20
