#!/usr/bin/env bash
# Session 39, call 8: gpt-oss-120b's step at M = 2048 spends ~100 us more than its kernels' own durations (call 7, ncu:
# 1193 us of kernels against 1288-1315 in the graph), where its GEMMs run persistent `/p/s/t` tiles (at M = 1024, one
# tile per CTA, the kernels add up to the step). Whole steps with the shipped tables (O) against the same tables with
# every persistent entry on a one-tile-per-CTA `/t` tile of the same block (N), O N N O.
# Usage: v119_persistent_in_steps.sh BUILD   (env OUT, MOEQ_CACHE_DIR; the N tables in $MOEQ_CACHE_DIR/tables119)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tables="$MOEQ_CACHE_DIR/tables119"
export STEPS_DEADLINE=500
steps_old_new gpt-oss-120b mxfp4 "1792 2048" "$tables/gpt-oss-120b_mxfp4.json" steps.txt
steps_old_new qwen3-30b-a3b mxfp4 "768 1024 1280 2560" "$tables/qwen3-30b-a3b_mxfp4.json" steps.txt
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
