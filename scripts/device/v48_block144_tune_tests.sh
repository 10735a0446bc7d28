#!/usr/bin/env bash
# Session 26, call 2: `moeq tune` at M = 2048 / 4096 / 8192 (the shipped tables' 128-row ranges) for
# Qwen3-30B-A3B MXFP4, INT4 and FP8-block and gpt-oss-120b MXFP4 (the picks go into the shipped
# tables by hand), then the GPU tests the warp-specialized body's change touches: MoeGemmGpu on the
# 64- and 128-row producer tiles (their copy and permute loops were generalized for 144 rows), every
# ExpertsGpu test, the warm-up test.
# Usage: v48_block144_tune_tests.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tune_layers 100 "qwen3-30b-a3b mxfp4 2048 4096 8192" "qwen3-30b-a3b int4-g128 2048 4096 8192" \
  "gpt-oss-120b mxfp4 2048 4096 8192" "qwen3-30b-a3b fp8-block 2048 4096 8192"
"$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup test rc=$? $(($(date +%s) - t0)) s"
left=$((t0 + 560 - $(date +%s)))
gpu_tests "128x256/1x8x1/4/p 128x256/1x8x1/3/p 128x128/1x8x1/4/p 128x256/1x8x1/5/p 64x256/1x8x1/4/p 64x256/1x8x1/6/p 64x256/1x8x1/8/p" \
  'MoeGemmGpu.*:ExpertsGpu.*' "$left"
grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $1, $2, $3, $4, $5}' | tail -40
