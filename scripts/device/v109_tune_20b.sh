#!/usr/bin/env bash
# Session 38, call 4: call 3 showed gpt-oss-20b's MXFP4 steps at M = 448-512 (1792-2048 rows, 128x256 tiles) ~60% slower
# than the planner's at M = 384; `moeq tune --update` over M = 448-2048, then whole steps with the table before (O)
# and after (N) the tune, O N N O.
# Usage: v109_tune_20b.sh BUILD "PRESET:M,M:TILE,TILE" "M ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
tune_update_tables "$2"
preset="${2%%:*}"
for who in O N N O; do
  table="$root/tuning/sm_90/${preset}_mxfp4.json"
  [ "$who" = N ] && table="$out/${preset}_mxfp4.json"
  # shellcheck disable=SC2086
  timeout 100 "$build/moeq" bench --trials 5 --kernel layer --preset "$preset" --scheme mxfp4 -M $3 --tuning "$table" \
    >"$out/o.tmp" 2>&1
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  grep -E "^copy" "$out/o.tmp" | head -1
  echo "steps $who $(($(date +%s) - t0)) s"
done
sort -k2,2 -k4,4n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
