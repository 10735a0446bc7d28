#!/usr/bin/env bash
# Session 39, call 5: the MMA-order activation and order_rows_for_mma with 16-byte stores (each thread one stored
# chunk, its 4 pairs gathered) against call 2-4's 4-byte stores: tests, then whole steps with the old binary (O,
# commit 375e996) and this one (N), O N N O; then `moeq tune --update` of Qwen3-30B-A3B MXFP4 at M = 1024-4096 with
# the `/t` candidates.
# Usage: v116_ordered_io.sh BUILD   (env OUT, MOEQ_CACHE_DIR; the old binary at $MOEQ_CACHE_DIR/bin/moeq_375)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
old="$MOEQ_CACHE_DIR/bin/moeq_375"
timeout 150 "$build/moeq_gpu_tests" --gtest_filter='ElementwiseGpu.MmaOrder*:ExpertsGpu.MmaOrderTilesMatchOracle' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|differs|rel |not at" "$out/gpu_tests.txt" | head -20
for who in O N N O; do
  bin="$build/moeq"
  [ "$who" = O ] && bin="$old"
  for item in "gpt-oss-120b|1024 1024 2048 4096" "qwen3-30b-a3b|1024 1024 4096"; do
    IFS='|' read -r p ms <<<"$item"
    # shellcheck disable=SC2086
    timeout 60 "$bin" bench --trials 7 --kernel layer --preset "$p" --scheme mxfp4 -M $ms >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  done
  echo "steps $who $(($(date +%s) - t0)) s"
done
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
TUNE_TIMEOUT=200 tune_update_tables "qwen3-30b-a3b:1024,2048,4096:144x256/1x8x1/4/p/t,144x256/1x8x1/6/p/t,144x256/1x8x1/8/p/t,144x256/1x8x1/3/p/s/t,144x256/1x8x1/5/p/s/t,128x256/1x8x1/4/p/t,96x256/1x8x1/4/p/s/t,96x256/1x8x1/6/p/t,80x256/1x8x1/6/p/t,80x256/1x8x1/8/p/t,80x256/1x8x1/6/p/s/t"
echo "done $(($(date +%s) - t0)) s"
