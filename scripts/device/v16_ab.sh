#!/usr/bin/env bash
# Session 15, call C: a tree (BUILD) against the tree before it (BASE_BUILD), both with the planner's tiles,
# in the same call and process order: MoeGemmGpu and ExpertsGpu on BUILD first; CASES twice (two rounds,
# fresh processes), CASES_ONCE once; then SWEEP ("PRESET|M ...|TILE ..." lines) on BUILD.
# Usage: v16_ab.sh BUILD BASE_BUILD   (env OUT; CASES, CASES_ONCE: "PRESET|M ..." lines; TEST_TILES; SWEEP)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_build="$2"
schemes="int4-g128 mxfp4 fp8-block"
direct_tiles="8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r"
"$(dirname "$0")/warm_parallel.sh" "$build/moeq" 12 >"$out/warm.txt" 2>&1 &
(build="$base_build"; warm_tiles "$schemes" "$direct_tiles") >"$out/warm_base.txt" 2>&1 &
wait
echo "warm $(($(date +%s) - t0)) s"
if [ -n "${SWEEP:-}" ]; then warm_tiles "$schemes" "$(sweep_tiles "$SWEEP")"; fi
gpu_tests "${TEST_TILES:-$direct_tiles}" "${TEST_FILTER:-MoeGemmGpu*:ExpertsGpu*}" 200
run_cases() {  # run_cases ROUND "PRESET|M ..." lines
  echo "$2" | while IFS='|' read -r p m; do
    [ -z "$p" ] && continue
    for s in $schemes; do
      for which in base new; do
        moeq="$build/moeq"; [ $which = base ] && moeq="$base_build/moeq"
        # shellcheck disable=SC2086
        timeout 100 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m >>"$out/$which$1.txt" 2>&1
      done
    done
    echo "bench $1 $p $(($(date +%s) - t0)) s"
  done
}
run_cases 1 "${CASES:-}"
run_cases 2 "${CASES:-}"
run_cases 1 "${CASES_ONCE:-}"
sweep_cases "${SWEEP:-}"
echo "done $(($(date +%s) - t0)) s"
