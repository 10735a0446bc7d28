#!/usr/bin/env bash
# Session 31, call 1: v69_gaps_and_suite.sh without the suite (it runs on this session's final binaries
# instead): the warm-up test, then the gap tables (HEAD) against session 30's call-6 tables (OLD).
# Usage: v70_gaps.sh BUILD OLD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old="$2"
timeout 120 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
tail -3 "$out/warmup.txt"
ab gaps old qwen3-30b-a3b mxfp4 "160 192 256 320 352 1280 1536 1792 2560 3072 3584" "" "--tuning $old/qwen3-30b-a3b_mxfp4.json"
ab gaps old gpt-oss-120b mxfp4 "3 4 160 192 384 512 640 704 2560 3072 3584" "" "--tuning $old/gpt-oss-120b_mxfp4.json"
ab gaps old qwen3-30b-a3b int4-g128 "192 320 352 1536 1792 3072 3584" "" "--tuning $old/qwen3-30b-a3b_int4-g128.json"
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
