#!/usr/bin/env bash
# Prepared in session 30, not yet run: what that session could not prove for lack of device time.
# (1) The whole GPU suite and the warm-up test on the binaries with the 48-row tiles and the table gaps.
# (2) The shipped tables (now with gaps) against the planner's rules and against session 30's call-6 tables
#     (OLD/<layer>.json: the tables before the gaps) at M inside and at the edges of the gaps.
# Usage: v69_gaps_and_suite.sh BUILD OLD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old="$2"
timeout 330 "$build/moeq_gpu_tests" >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/gpu_tests.txt" | head
timeout 120 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
ab gaps old qwen3-30b-a3b mxfp4 "160 192 256 320 352 1280 1536 1792 2560 3072 3584" "" "--tuning $old/qwen3-30b-a3b_mxfp4.json"
ab gaps old gpt-oss-120b mxfp4 "3 4 160 192 384 512 640 704 2560 3072 3584" "" "--tuning $old/gpt-oss-120b_mxfp4.json"
ab gaps old qwen3-30b-a3b int4-g128 "192 320 352 1536 1792 3072 3584" "" "--tuning $old/qwen3-30b-a3b_int4-g128.json"
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
