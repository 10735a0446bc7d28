#!/usr/bin/env bash
# Split-K and deeper-ring sweep (GEMM v5) in one device call: `moeq bench` over the candidate
# tiles per M range, Qwen3-30B-A3B GEMM1 (plus DeepSeek-V3 at M = 1). Usage: split_sweep.sh MOEQ
set -u
moeq="$1"
bench() { timeout 200 "$moeq" bench --kernel gemm1 --trials 5 "$@" 2>&1 | grep -v "^$"; }
bench --preset qwen3-30b-a3b --tokens 1 4 --scheme int4-g128 mxfp4 fp8-block \
  --tile 8x32/1x1x4/16 8x32/1x1x4/16/k2 8x32/1x1x4/16/k4 8x32/1x1x1/8/k4
bench --preset deepseek-v3 --tokens 1 --scheme int4-g128 fp8-block \
  --tile 8x32/1x1x4/16 8x32/1x1x4/16/k2 8x32/1x1x4/16/k4
bench --preset qwen3-30b-a3b --tokens 16 64 --scheme int4-g128 mxfp4 \
  --tile 8x128/1x4x1/4 8x128/1x4x1/8 8x128/1x4x1/4/k2 8x128/1x4x1/4/k4 8x128/1x8x1/4/k2
bench --preset qwen3-30b-a3b --tokens 16 64 --scheme fp8-block \
  --tile 16x64/1x4x1/4 16x64/1x4x1/4/k2 16x64/1x4x1/8/k2 8x128/1x8x1/4 8x128/1x8x1/4/k2
bench --preset qwen3-30b-a3b --tokens 1024 --scheme int4-g128 --tile 64x128/1x4x1/4 64x128/1x4x1/4/k2
