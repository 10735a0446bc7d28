#!/usr/bin/env bash
# Session 16, call A: INT4 offset sums (GEMM v17) in several builds of the same tree against the tree
# before it, each a `moeq` binary in BINS (moeq_base, moeq_VARIANT ...): the variants differ only in
# the token-sums prologue (batch size, before or after the ring's first loads). First MoeGemmGpu and
# ExpertsGpu with TESTS (a moeq_gpu_tests binary of one variant) on the INT4 direct tiles; then CASES
# ("PRESET|M ..." lines) for INT4 GEMM1 and GEMM2, every binary, ROUNDS rounds in alternating order.
# Usage: v17_variants.sh BINS TESTS "VARIANT ..."   (env OUT; CASES; ROUNDS, default 2)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$1"; tests="$2"; variants="base $3"
tiles="8x128/1x4x1/2/r 8x128/1x4x1/4/o4/r 8x32/1x1x4/4/o4/r 8x64/1x2x2/2/r"
presets=$(echo "$CASES" | cut -d'|' -f1 | sort -u)
for v in $variants; do for p in $presets; do for t in $tiles; do
  echo "$bins/moeq_$v compile --arch sm_90a --preset $p --scheme int4-g128 --tile $t"
done; done; done | xargs -P 16 -I{} sh -c "{} | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
MOEQ_TEST_TILES="$tiles" timeout 200 "$tests" --gtest_filter='MoeGemmGpu*:ExpertsGpu*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|differ|rel [0-9]" "$out/gpu_tests.txt" | head -30
for round in $(seq 1 "${ROUNDS:-2}"); do
  order="$variants"; [ $((round % 2)) -eq 0 ] && order=$(echo "$variants" | tr ' ' '\n' | tac | tr '\n' ' ')
  echo "$CASES" | while IFS='|' read -r p m; do
    [ -z "$p" ] && continue
    for v in $order; do
      # shellcheck disable=SC2086
      timeout 100 "$bins/moeq_$v" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme int4-g128 -M $m \
        >>"$out/${v}_r$round.txt" 2>&1
    done
  done
  echo "round $round $(($(date +%s) - t0)) s"
done
echo "done $(($(date +%s) - t0)) s"
