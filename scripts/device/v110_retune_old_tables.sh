#!/usr/bin/env bash
# Session 38, call 5: `moeq tune --update` of tables older than the warp-specialized tile families (DeepSeek-V3 MXFP4 and
# FP8-block, Qwen3-30B-A3B FP8-block, Mixtral-8x7B INT4-g128: sessions 21-26 entries with 64- and 128-row blocks at
# 16-128 rows per expert), then whole steps with each table before (O) and after (N) its tune, O N N O.
# Usage: v110_retune_old_tables.sh BUILD "PRESET/SCHEME:TUNE_M,..:TILE,..:STEP_M,.. ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
TUNE_TIMEOUT=200 tune_update_tables "$2"
for item in $2; do
  IFS=: read -r target _ _ step_m <<<"$item"
  preset="${target%%/*}" scheme="${target#*/}"
  [ -f "$out/${preset}_${scheme}.json" ] || continue
  cmp -s "$root/tuning/sm_90/${preset}_${scheme}.json" "$out/${preset}_${scheme}.json" && continue
  steps_old_new "$preset" "$scheme" "$(echo "$step_m" | tr ',' ' ')" "$out/${preset}_${scheme}.json" steps.txt
done
[ -f "$out/steps.txt" ] && sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
