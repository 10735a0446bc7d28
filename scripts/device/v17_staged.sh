#!/usr/bin/env bash
# Session 16, call B: direct tiles with the token rows staged in shared memory (`/t`, GEMM v17)
# against the planner's tiles of the tree before (BASE, a moeq binary). First MoeGemmGpu and
# ExpertsGpu (TESTS, a moeq_gpu_tests binary) on TEST_TILES; then, per "PRESET|M ...|TILE ..." line
# of SWEEP, BASE with its planner and NEW on those tiles, for SCHEMES, base first and last.
# Usage: v17_staged.sh NEW BASE TESTS   (env OUT; SWEEP; TEST_TILES; SCHEMES)
# NOTE: the `/t` tiles were measured slower and reverted (docs/perf-notes.md GEMM v17); this is the record
# of that call.
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
new="$1"; base="$2"; tests="$3"
schemes="${SCHEMES:-int4-g128 mxfp4}"
{
  echo "$SWEEP" | while IFS='|' read -r p m tiles; do
    [ -z "$p" ] && continue
    for s in $schemes; do
      for t in $tiles; do echo "$new compile --arch sm_90a --preset $p --scheme $s --tile $t"; done
      echo "$base compile --arch sm_90a --preset $p --scheme $s"
    done
  done
  for s in int4-g128 mxfp4 fp8-block nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch int4-g128:f16; do
    for t in $TEST_TILES; do echo "$new compile --arch sm_90a --preset tiny --scheme $s --tile $t"; done
  done
} | sort -u | xargs -P 16 -I{} sh -c "{} | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
MOEQ_TEST_TILES="$TEST_TILES" timeout 240 "$tests" --gtest_filter='MoeGemmGpu*:ExpertsGpu*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|error|Expected|Which is|tile" "$out/gpu_tests.txt" | head -40
for which in base new base; do
  echo "$SWEEP" | while IFS='|' read -r p m tiles; do
    [ -z "$p" ] && continue
    for s in $schemes; do
      if [ "$which" = base ]; then
        # shellcheck disable=SC2086
        timeout 100 "$base" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m >>"$out/base.txt" 2>&1
      else
        # shellcheck disable=SC2086
        timeout 150 "$new" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m --tile $tiles >>"$out/new.txt" 2>&1
      fi
    done
  done
  echo "$which $(($(date +%s) - t0)) s"
done
echo "done $(($(date +%s) - t0)) s"
