#!/usr/bin/env bash
# Session 38, call 3: call 2's `moeq tune --update` changed two MXFP4 tables (gpt-oss-120b: rows (4096, 6144] to the
# planner; gpt-oss-20b: rows (512, 1024] to 48x512/1x8x1/4/p | 48x256/1x8x1/6/p and (1024, 1536] to the planner).
# Whole steps with the old table (O) and the new one (N), O N N O, at the sampled M and between them.
# Usage: v108_tables_steps.sh BUILD OLD_TABLES_DIR   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
old="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
steps() {  # WHO PRESET "M ..."
  local table="$root/tuning/sm_90/${2}_mxfp4.json"
  [ "$1" = O ] && table="$old/${2}_mxfp4.json"
  # shellcheck disable=SC2086
  timeout 100 "$build/moeq" bench --trials 5 --kernel layer --preset "$2" --scheme mxfp4 -M $3 --tuning "$table" \
    >"$out/o.tmp" 2>&1
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$1" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  grep -E "^copy" "$out/o.tmp" | head -1
}
for who in O N N O; do
  steps "$who" gpt-oss-120b "1280 1536 1792"
  steps "$who" gpt-oss-20b "160 256 320 384 448 512"
  echo "steps $who $(($(date +%s) - t0)) s"
done
sort -k2,2 -k4,4n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
