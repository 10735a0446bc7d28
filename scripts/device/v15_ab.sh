#!/usr/bin/env bash
# Session 14, calls C and E: a tree (BUILD) against the tree before it (BASE_BUILD), both with the planner's own
# tiles, in the same call and process order, two rounds; every GPU test on BUILD first (MoeGemmGpu
# on TEST_TILES); then an optional tile sweep on BUILD.
# Usage: v15_ab.sh BUILD BASE_BUILD   (env OUT; TEST_TILES, TEST_FILTER; CASES: "PRESET|M ..." lines;
#        SWEEP: "PRESET|M ...|TILE ..." lines, every scheme)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_build="$2"
cases="${CASES:-qwen3-30b-a3b|1 2 4 8 16 64}"
sweep="${SWEEP:-}"
schemes="int4-g128 mxfp4 fp8-block"
"$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
if [ -n "$sweep" ]; then warm_tiles "$schemes" "$(sweep_tiles "$sweep")"; fi
gpu_tests "${TEST_TILES:-8x128/1x4x1/2/r 8x64/1x2x2/2/r 16x128/1x4x1/2/r}" "${TEST_FILTER:-*}" 300
for round in ${ROUNDS:-1 2}; do
  echo "$cases" | while IFS='|' read -r p m; do
    [ -z "$p" ] && continue
    for s in $schemes; do
      for which in base new; do
        moeq="$build/moeq"; [ $which = base ] && moeq="$base_build/moeq"
        # shellcheck disable=SC2086
        timeout 100 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m \
          >>"$out/$which$round.txt" 2>&1
      done
    done
    echo "bench $round $p rc=$? $(($(date +%s) - t0)) s"
  done
done
sweep_cases "$sweep"
