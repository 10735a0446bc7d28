#!/usr/bin/env bash
# Session 46, call 2: the MXFP4 steps that lost to Humming's (less its align) in call 1 on the H100
# (Qwen3-30B-A3B M = 384 / 640: 1.05x / 1.09x; gpt-oss-120b M = 640 / 768 / 1024: 1.04x / 1.15x / 1.03x), through
# `moeq tune --update` with the warp-specialized 24- to 64-row candidates (all in the v136 pack), then whole steps
# with the shipped table (O) and the updated one (N), O N N O.
# Usage: v137_losses_tune.sh BUILD   (env OUT, MOEQ_CACHE_DIR, TUNE_TIMEOUT, STEPS_DEADLINE)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
c="24x256/1x8x1/4/o2/p/t,24x128/1x8x1/4/o2/p/t,24x128/1x8x1/8/o2/p/t,32x128/1x8x1/8/o2/p/t,24x512/1x8x1/6/p/t"
c+=",24x512/1x8x1/8/p/t,32x512/1x8x1/8/p/t,48x256/1x8x1/8/p/t,48x256/1x8x1/6/p/s/t,48x512/1x8x1/6/p/t"
c+=",48x512/1x8x1/4/p/t,64x256/1x8x1/8/p/t,32x128/1x8x1/4/o3,24x128/1x4x1/4/r"
tune_update_tables "qwen3-30b-a3b:384,640:$c gpt-oss-120b:640,768,1024:$c"
steps_old_new qwen3-30b-a3b mxfp4 "256 384 512 640 768" "$out/qwen3-30b-a3b_mxfp4.json" steps.txt
steps_old_new gpt-oss-120b mxfp4 "512 640 768 1024" "$out/gpt-oss-120b_mxfp4.json" steps.txt
awk '{k=$2" "$3" "$4; t[k" "$1]+=$5; n[k" "$1]++} END {for (x in t) print x, t[x]/n[x]}' "$out/steps.txt" | sort
echo "done $(($(date +%s) - t0)) s"
