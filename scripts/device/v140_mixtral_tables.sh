#!/usr/bin/env bash
# Session 47, call 2: `moeq tune` of Mixtral-8x7B FP8-block (no table yet), then whole steps O N N O of both new
# Mixtral tables against the planner's rules (O), MXFP4's from call 1 (v139) in TABLES.
# NOTE: written before these tables were shipped (23a61ac): on a later tree O is the shipped table, the same as N.
# Usage: v140_mixtral_tables.sh BUILD TABLES   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
tune_layers 260 "mixtral-8x7b fp8-block 1 2 4 8 16 32 64 128 256 512 1024 2048 4096"
grep -E "^ +[0-9]|wrote|candidate" "$out/tune.txt" | tail -16
tar xf "$out/tables.tar" -C "$out"
STEPS_TIMEOUT=90 STEPS_DEADLINE=420 steps_old_new mixtral-8x7b mxfp4 "1 4 32 128 256" "$tables/mixtral-8x7b_mxfp4.json" steps.txt
STEPS_TIMEOUT=90 STEPS_DEADLINE=520 steps_old_new mixtral-8x7b fp8-block "1 4 32 128 256" "$out/tables/mixtral-8x7b_fp8-block.json" steps.txt
awk '{k=$2" "$3" "$4; t[k" "$1]+=$5; n[k" "$1]++} END {for (x in t) print x, t[x]/n[x], n[x]}' "$out/steps.txt" | sort
echo "done $(($(date +%s) - t0)) s"
