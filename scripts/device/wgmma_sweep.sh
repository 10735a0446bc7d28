#!/usr/bin/env bash
# GEMM v5 wgmma sweep in one device call: the warpgroup-MMA tiles (/w) against the planner's
# mma.sync tiles at M >= 256, Qwen3-30B-A3B GEMM1 and GEMM2, plus the cuBLAS bf16 ceiling of
# the same shapes. Usage: wgmma_sweep.sh MOEQ   (env OUT)
set -u
moeq="$1"
out="${OUT:-/tmp/moeq-out}"
bench() { timeout 200 "$moeq" bench --trials 5 "$@" 2>&1 | grep -v "^$"; }
bench --kernel gemm1 gemm2 --preset qwen3-30b-a3b --tokens 256 1024 4096 --scheme int4-g128 mxfp4 fp8-block
bench --kernel gemm1 --preset qwen3-30b-a3b --tokens 256 1024 4096 --scheme int4-g128 mxfp4 fp8-block \
  --tile 64x64/1x4x1/4/w 64x128/1x4x1/4/w 64x128/1x4x1/6/w 64x256/1x4x1/4/w 64x128/1x4x1/4/o2/w
timeout 120 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b >"$out/cublas.txt" 2>&1
cat "$out/cublas.txt"
