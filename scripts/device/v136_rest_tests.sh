#!/usr/bin/env bash
# Session 45's second device call: the GPU tests its first call did not reach (that filter's timeout came while
# ExpertsGpu.DirectTilesOf24And32RowsMatchOracle compiled), then `moeq verify` of the two MXFP4 layers whose shipped
# tables took the two-CTA `/o2` entry, at M that entry serves (rows (1024, 3072]: gpt-oss-120b M = 300, Qwen3-30B-A3B
# M = 200). Kernels from scripts/device/lists/v136_pack.txt (warm_parallel.sh's list and those two layers), so nothing
# is warmed here. MoeGemmGpu.PersistentTilesEqualOneTilePerCta (149 s in session 43) is left out for time: its kernels'
# machine code is unchanged since it last passed (session 44's dumps).
# Usage: v136_rest_tests.sh BUILD [DEADLINE]   (env OUT, MOEQ_CACHE_DIR)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
deadline=$((t0 + ${2:-520}))
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv >"$out/device.txt" 2>&1
"$build/moeq" cache info
done_already='ExpertsGpu.EveryFormatEveryLayoutMatchesOracle:ExpertsGpu.QuantizedActivationPairsMatchOracle'
done_already+=':ExpertsGpu.OddShapesExpertMapAndBias:ExpertsGpu.BatchInvariantPrefixRowsAreBitIdentical'
done_already+=':ExpertsGpu.TuningTableTilesMatchOracle:MoeGemmGpu.PersistentTilesEqualOneTilePerCta'
timeout $((deadline - $(date +%s) - 110)) "$build/moeq_gpu_tests" --gtest_filter="ExpertsGpu.*:MoeGemmGpu.*-$done_already" \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[  PASSED|tests ran" "$out/gpu_tests.txt" | head -20
grep -cE "^\[       OK" "$out/gpu_tests.txt"
{
  timeout 60 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4 --activation silu --layout indexed contiguous \
    -M 200 --codes prepared
  timeout $((deadline - $(date +%s) - 5)) "$build/moeq" verify --preset gpt-oss-120b --scheme mxfp4 \
    --activation swiglu-oai --layout indexed -M 300 --codes prepared
} >"$out/verify.txt" 2>&1
echo "verify $(($(date +%s) - t0)) s"
grep -E "^(pass|FAIL)|verify:" "$out/verify.txt"
