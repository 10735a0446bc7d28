#!/usr/bin/env bash
# GEMM v5 sweep in one device call: split K over clusters (/kN) and register caps for more CTAs
# per SM (/oN) against the v4 planner tiles, `moeq bench` per M range, Qwen3-30B-A3B GEMM1 (plus
# DeepSeek-V3 at M = 1); BASE (an older `moeq`, optional) runs the M = 1 / 4 cases first with
# its own planner. Usage: v5_sweep.sh MOEQ [BASE]   (the first sweep, b71d5f3, timed only /kN)
set -u
moeq="$1"
base="${2:-}"
bench() { timeout 200 "$@" --kernel gemm1 --trials 5 2>&1 | grep -v "^$"; }
[ -n "$base" ] && bench "$base" bench --preset qwen3-30b-a3b --tokens 1 4 --scheme int4-g128 mxfp4 fp8-block
bench "$moeq" bench --preset qwen3-30b-a3b --tokens 1 4 --scheme int4-g128 mxfp4 fp8-block \
  --tile 8x32/1x1x4/16 8x32/1x1x4/16/k2 8x32/1x1x4/16/k4
bench "$moeq" bench --preset deepseek-v3 --tokens 1 --scheme int4-g128 fp8-block \
  --tile 8x32/1x1x4/16 8x32/1x1x4/16/k2 8x32/1x1x4/16/k4
bench "$moeq" bench --preset qwen3-30b-a3b --tokens 16 64 --scheme int4-g128 mxfp4 \
  --tile 8x128/1x4x1/4 8x128/1x4x1/4/o6 8x128/1x4x1/4/o8
bench "$moeq" bench --preset qwen3-30b-a3b --tokens 16 64 --scheme fp8-block --tile 16x64/1x4x1/4 16x64/1x4x1/4/o8
bench "$moeq" bench --preset qwen3-30b-a3b --tokens 256 --scheme int4-g128 fp8-block --tile 32x128/1x8x1/4 32x128/1x8x1/4/o2
bench "$moeq" bench --preset qwen3-30b-a3b --tokens 1024 4096 --scheme int4-g128 fp8-block \
  --tile 64x128/1x4x1/4 64x128/1x4x1/4/o3
