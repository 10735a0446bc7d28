#!/usr/bin/env bash
# Session 32, call 6: `moeq tune --update` on its first GPU run: Qwen3-30B-A3B INT4-g128 at 1.5x / 1.25x the powers of
# two, merged into the shipped table (the pick kept only where it beats the planner's tiles and the table's entry),
# then the merged table against the shipped one as whole steps, A B B A, at the sampled M.
# Usage: v79_tune_update_int4.sh MOEQ "M ..."   (env OUT, MOEQ_CACHE_DIR)
set -u
moeq="$1" tokens="$2" out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
t0=$(date +%s)
shipped=tuning/sm_90/qwen3-30b-a3b_int4-g128.json
# shellcheck disable=SC2086
timeout 300 "$moeq" tune --preset qwen3-30b-a3b --scheme int4-g128 -M $tokens --update "$shipped" \
  --out "$out/qwen3-30b-a3b_int4-g128.json" >"$out/tune.txt" 2>&1
echo "tune rc=$? $(($(date +%s) - t0)) s"
cat "$out/tune.txt"
for t in new old old new; do
  [ $(($(date +%s) - t0)) -gt 500 ] && { echo "skipped $t: no time left"; continue; }
  table="$shipped"
  [ "$t" = new ] && table="$out/qwen3-30b-a3b_int4-g128.json"
  first="${tokens%% *}"
  # shellcheck disable=SC2086
  timeout 90 "$moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme int4-g128 -M $first $tokens \
    --tuning "$table" >"$out/s.tmp" 2>&1
  echo "rc=$? $t $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/s.tmp" | tail -n +2 | awk -v t="$t" '{print t, $4, $5}' >>"$out/steps.txt"
done
sort -k2,2n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
