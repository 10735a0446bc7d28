#!/usr/bin/env bash
# Session 38, call 6: whole steps with a shipped table (O) against a new one (N), O N N O, where a tuning call ran out
# of time before them (call 5: DeepSeek-V3 FP8-block at M >= 2048).
# Usage: v111_steps_tables.sh BUILD "PRESET/SCHEME:M,..:NEW_TABLE ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
for item in $2; do
  IFS=: read -r target step_m new_table <<<"$item"
  preset="${target%%/*}" scheme="${target#*/}"
  steps_old_new "$preset" "$scheme" "$(echo "$step_m" | tr ',' ' ')" "$new_table" steps_new.txt
done
sort -k2,3 -k4,4n -k1,1 "$out/steps_new.txt"
