#!/usr/bin/env bash
# Session 17: GEMM1 and GEMM2 of several schemes with `moeq` binaries of different trees (BINS/moeq_base,
# BINS/moeq_VARIANT ...), ROUNDS rounds in alternating order, planner tiles; then, where BUILD is given,
# that build's every GPU test, `moeq verify` and the warm-up test (the proof of the tree it was built from).
# Usage: v18_variants.sh BINS "VARIANT ..." [BUILD]   (env OUT; CASES: "PRESET|M ..." lines; SCHEMES; ROUNDS, default 2)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$1"; variants="base $2"; proof="${3:-}"
presets=$(echo "$CASES" | cut -d'|' -f1 | sort -u)
for v in $variants; do for p in $presets; do for s in $SCHEMES; do
  echo "$bins/moeq_$v compile --arch sm_90a --preset $p --scheme $s"
done; done; done | xargs -P 16 -I{} sh -c "{} 2>&1 | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
for round in $(seq 1 "${ROUNDS:-2}"); do
  order="$variants"; [ $((round % 2)) -eq 0 ] && order=$(echo "$variants" | tr ' ' '\n' | tac | tr '\n' ' ')
  echo "$CASES" | while IFS='|' read -r p m; do
    [ -z "$p" ] && continue
    for s in $SCHEMES; do for v in $order; do
      # shellcheck disable=SC2086
      timeout 100 "$bins/moeq_$v" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m \
        >>"$out/${v}_r$round.txt" 2>&1
    done; done
  done
  echo "round $round $(($(date +%s) - t0)) s"
done
if [ -n "$proof" ]; then
  build="$proof"
  timeout 330 "$build/moeq_gpu_tests" >"$out/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$? $(($(date +%s) - t0)) s"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/gpu_tests.txt" | head
  timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(tail -1 "$out/verify.txt")"
  timeout 100 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
  echo "warmup rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/warmup.txt")"
fi
echo "done $(($(date +%s) - t0)) s"
