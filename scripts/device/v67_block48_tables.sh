#!/usr/bin/env bash
# Session 30, call 5: the shipped tables with 48-row entries (this build) against the previous ones
# (OLD/<layer>.json), alternating, and those entries through Experts::apply against the reference.
# Usage: v67_block48_tables.sh BUILD OLD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old="$2"
{
  timeout 70 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4 --tokens 400 --check 2>&1 | tail -1
  timeout 70 "$build/moeq" run --preset qwen3-30b-a3b --scheme int4-g128 --tokens 300 --check 2>&1 | tail -1
  timeout 90 "$build/moeq" run --preset gpt-oss-120b --scheme mxfp4 --tokens 520 --check 2>&1 | tail -1
} >"$out/run_check.txt" 2>&1
echo "run checks $(($(date +%s) - t0)) s"
cat "$out/run_check.txt"
ab block48 old gpt-oss-120b mxfp4 "768 1024 1280 1536" "" "--tuning $old/gpt-oss-120b_mxfp4.json"
ab block48 old qwen3-30b-a3b mxfp4 "384 512" "" "--tuning $old/qwen3-30b-a3b_mxfp4.json"
ab block48 old qwen3-30b-a3b int4-g128 "384 512" "" "--tuning $old/qwen3-30b-a3b_int4-g128.json"
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
