#!/usr/bin/env bash
# Session 12, calls A-C: the direct-load tiles (GEMM v13) against the planner's small-M tiles. Calls A
# and B ran versions of the body named `/d` (a register ring 4 deep, then a per-warp shared-memory
# ring), removed after call C; bench/results/2026-12-01-h200-gemm-v13.md lists each call's tiles. MoeGemmGpu on the tiles under test (every
# scheme, both code layouts, gather and masked), then GEMM1 and GEMM2 for INT4, MXFP4 and
# FP8-block, all tiles in one process per scheme and preset, two rounds.
# Usage: v13_direct.sh MOEQ_BUILD   (env OUT; TEST_TILES, TILES, M, PRESET, EXTRA: see below)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
test_tiles="${TEST_TILES:-8x128/1x4x1/2/r 8x128/1x4x1/4/r 8x64/1x2x2/4/r 8x256/1x8x1/4/r}"
tiles="${TILES:-8x128/1x4x1/4/p 8x128/1x8x1/4/p 8x32/1x1x4/16 $test_tiles}"
ms="${M:-1 4 16 64}"
preset="${PRESET:-qwen3-30b-a3b}"
# EXTRA: "PRESET|M|TILES" cases timed after the main ones (one per line).
extra="${EXTRA:-}"
all_tiles="$tiles $(echo "$extra" | cut -d'|' -f3 | tr '\n' ' ')"
warm_tiles "int4-g128 mxfp4 fp8-block" "$(echo $all_tiles | tr ' ' '\n' | sort -u | tr '\n' ' ')"
if [ -n "$test_tiles" ]; then
  MOEQ_TEST_TILES="$test_tiles" timeout 300 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -20
fi
for round in 1 2; do
  for s in int4-g128 mxfp4 fp8-block; do
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $preset --scheme $s -M $ms \
      --tile $tiles >>"$out/bench$round.txt" 2>&1
    echo "bench $round $s rc=$? $(($(date +%s) - t0)) s"
    echo "$extra" | while IFS='|' read -r p m t; do
      [ -z "$p" ] && continue
      # shellcheck disable=SC2086
      timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m --tile $t \
        >>"$out/bench$round.txt" 2>&1
    done
  done
done
