#!/usr/bin/env bash
# Session 39, call 13: the MXFP4 tables' rows (3072, 4096] (gpt-oss-120b M = 769-1024, Qwen3 M = 385-512) on the
# 6-stage 512-channel `/t` tile instead of the 4-stage one (call 1: 2-3% less GEMM time at gpt-oss M = 1024; `moeq
# tune`'s confirm rounds disagreed, call 4): whole steps, O (shipped) N (6 stages) N O.
# Usage: v124_wide_ring.sh BUILD   (env OUT, MOEQ_CACHE_DIR; the N tables in $MOEQ_CACHE_DIR/tables124)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tables="$MOEQ_CACHE_DIR/tables124"
steps_old_new gpt-oss-120b mxfp4 "1024 1024 896" "$tables/gpt-oss-120b_mxfp4.json" steps.txt
steps_old_new qwen3-30b-a3b mxfp4 "512 512 448" "$tables/qwen3-30b-a3b_mxfp4.json" steps.txt
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
