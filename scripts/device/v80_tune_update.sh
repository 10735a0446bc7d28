#!/usr/bin/env bash
# Session 32, call 8: `moeq tune --update` on the shipped MXFP4 tables of Qwen3-30B-A3B and gpt-oss-120b (after this
# session's merged entries): picks kept where they beat the planner's tiles and the table's entry, gaps where the
# planner's tiles beat the entry; then each updated table against the shipped one as whole steps, A B B A.
# Usage: v80_tune_update.sh MOEQ "PRESET:SCHEME:M,M ..."   (env OUT, MOEQ_CACHE_DIR)
set -u
moeq="$1" out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
t0=$(date +%s)
for item in $2; do
  preset="${item%%:*}" rest="${item#*:}"
  scheme="${rest%%:*}" tokens="$(echo "${rest#*:}" | tr ',' ' ')"
  shipped="tuning/sm_90/${preset}_${scheme}.json" updated="$out/${preset}_${scheme}.json"
  [ $(($(date +%s) - t0)) -gt 200 ] && { echo "skipped $item: no time left"; continue; }
  # shellcheck disable=SC2086
  timeout 200 "$moeq" tune --preset "$preset" --scheme "$scheme" -M $tokens --update "$shipped" --out "$updated" \
    >>"$out/tune.txt" 2>&1
  echo "tune $preset rc=$? $(($(date +%s) - t0)) s"
  for t in new old old new; do
    [ $(($(date +%s) - t0)) -gt 330 ] && { echo "skipped $t: no time left"; continue; }
    table="$shipped"
    [ "$t" = new ] && table="$updated"
    # shellcheck disable=SC2086
    timeout 60 "$moeq" bench --trials 7 --kernel layer --preset "$preset" --scheme "$scheme" -M ${tokens%% *} $tokens \
      --tuning "$table" >"$out/s.tmp" 2>&1
    echo "rc=$? $t $(($(date +%s) - t0)) s"
    grep -E "^layer  $preset" "$out/s.tmp" | tail -n +2 | awk -v t="$t" '{print t, $2, $4, $5}' >>"$out/steps.txt"
  done
done
grep -v "^tune: wrote" "$out/tune.txt"
sort -k2,2 -k3,3n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
