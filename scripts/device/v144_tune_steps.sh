#!/usr/bin/env bash
# Session 47: the first GPU run of `moeq tune --steps` (contenders timed as whole steps). Qwen3-30B-A3B MXFP4 M = 384
# with --update of the table before calls 7-9 (OLD_QWEN3, the 24-row `/o2` entry at rows 3072): the step sweep found
# 48x512/1x8x1/6/p/t there, while session 46's GEMM-timed tune picked the 32-row pair. gpt-oss-120b M = 640 with
# --update of the shipped table, where no pair beat the entry.
# Usage: v144_tune_steps.sh BUILD OLD_QWEN3   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
c="24x256/1x8x1/4/o2/p/t 24x128/1x8x1/4/o2/p/t 24x128/1x8x1/8/o2/p/t 24x512/1x8x1/6/p/t 24x512/1x8x1/8/p/t
24x128/1x4x1/4/r 32x128/1x8x1/8/o2/p/t 32x512/1x8x1/8/p/t 32x128/1x8x1/4/o3 48x256/1x8x1/8/p/t 48x256/1x8x1/6/p/s/t
48x512/1x8x1/6/p/t 48x512/1x8x1/4/p/t"
# shellcheck disable=SC2086
timeout 200 "$build/moeq" tune --preset qwen3-30b-a3b --scheme mxfp4 -M 384 --steps --min-gain 2 --candidates $c \
  --update "$2" --out "$out/qwen3_steps.json" >>"$out/tune.txt" 2>&1
echo "tune qwen3 rc=$? $(($(date +%s) - t0)) s"
# shellcheck disable=SC2086
timeout 200 "$build/moeq" tune --preset gpt-oss-120b --scheme mxfp4 -M 640 --steps --min-gain 2 --candidates $c \
  --update "$root/tuning/sm_90/gpt-oss-120b_mxfp4.json" --out "$out/gpt_oss_steps.json" >>"$out/tune.txt" 2>&1
echo "tune gpt-oss rc=$? $(($(date +%s) - t0)) s"
cat "$out/tune.txt"
echo "done $(($(date +%s) - t0)) s"
