#!/usr/bin/env bash
# Session 49's second call: the two patches as they land (self-routed GEMM1; the planner's 8-deep few-CTAs ring, its
# 6-deep rule dropped after call 1) against HEAD without them, whole steps O N N O (O = OLD_BUILD, N = BUILD), with
# the shipped tables (where self-routing applies, and M where neither patch changes the plan: the cost of the new
# kernel parameters) and with the planner's rules (`--no-shipped-tuning`: where the ring rule applies). Then
# `moeq verify` with BUILD on the layers the planner serves with the 8-deep ring and on INT4 self-routed.
# NOTE: call 2 ran it with its own copies of the steps and verify loops; evidence_lib.sh's layer_steps and
# layer_verify are those loops, moved.
# Usage: s49_landing_steps.sh BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_build="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
layer_steps shipped qwen3-30b-a3b mxfp4 "1 2 16 256" "O N N O"
layer_steps shipped qwen3-30b-a3b int4-g128 "1 2 16" "O N N O"
layer_steps shipped gpt-oss-120b mxfp4 "1 2 16 256" "O N N O"
layer_steps shipped mixtral-8x7b mxfp4 "1 2 4" "O N N O"
layer_steps planner mixtral-8x7b mxfp4 "1 2" "O N N O"
layer_steps planner mixtral-8x7b int4-g128 "1 2" "O N N O"
layer_steps planner mixtral-8x7b nvfp4 "1 2" "O N N O"
layer_steps planner qwen3-30b-a3b mxfp4 "1 2" "O N N O"
layer_verify "mixtral-8x7b nvfp4 1" "qwen3-30b-a3b int4-g128 1 2"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
