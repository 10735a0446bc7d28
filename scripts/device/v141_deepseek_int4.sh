#!/usr/bin/env bash
# Session 47, call 4: DeepSeek-V3 INT4-g128 table past M = 1024 (`moeq tune --update` of call 3's table in TABLES at
# M = 2048 and 4096), then whole steps O N N O against the planner's rules at M = 1, 2, 256, 1024.
# NOTE: written before these tables were shipped (23a61ac): on a later tree O is the shipped table, the same as N.
# Usage: v141_deepseek_int4.sh BUILD TABLES   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
[ -n "${SKIP_TUNE:-}" ] || timeout 300 "$build/moeq" tune --preset deepseek-v3 --scheme int4-g128 -M 2048 4096 --min-gain 3 \
  --update "$tables/deepseek-v3_int4-g128.json" --out "$out/deepseek-v3_int4-g128.json" >"$out/tune.txt" 2>&1
echo "tune rc=$? $(($(date +%s) - t0)) s"
grep -v "^tune: wrote" "$out/tune.txt"
table="$out/deepseek-v3_int4-g128.json"
[ -f "$table" ] || table="$tables/deepseek-v3_int4-g128.json"
STEPS_TIMEOUT=120 STEPS_DEADLINE=480 steps_old_new deepseek-v3 int4-g128 "1 2 256 1024" "$table" steps.txt
awk '{k=$2" "$3" "$4; t[k" "$1]+=$5; n[k" "$1]++} END {for (x in t) print x, t[x]/n[x], n[x]}' "$out/steps.txt" | sort
echo "done $(($(date +%s) - t0)) s"
