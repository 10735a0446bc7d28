#!/usr/bin/env bash
# Session 11, call E: at about 128 rows per expert (gpt-oss-120b and DeepSeek-V3 at M = 4096, Qwen3 at
# M = 2048), 128-row blocks (`128x256/1x8x1/4/p`, the planner's from 96 rows) against 64-row ones
# (`64x256/1x8x1/8/p`), with cuBLAS bf16 of DeepSeek-V3.
# Usage: v12_block128.sh MOEQ   (env OUT)
set -u
moeq="$1"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
t0=$(date +%s)
tiles="128x256/1x8x1/4/p 64x256/1x8x1/8/p"
for s in int4-g128 mxfp4 fp8-block; do echo "--preset tiny --scheme $s --tile $tiles"; done |
  xargs -P 3 -L 1 sh -c "\"$moeq\" compile --arch sm_90a \$0 \"\$@\" | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
bench() { timeout 200 "$moeq" bench --trials 5 --tile $tiles "$@" >>"$out/block128.txt" 2>&1; echo "bench $* rc=$?"; }
bench --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M 4096
bench --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 mxfp4 fp8-block -M 2048
bench --kernel gemm1 --preset deepseek-v3 --scheme fp8-block int4-g128 -M 4096
grep -E "^gemm[12] " "$out/block128.txt" | cut -c1-140
timeout 120 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset deepseek-v3 qwen3-30b-a3b gpt-oss-120b --tokens 2048 4096 >"$out/cublas_deepseek-v3.txt" 2>&1
cat "$out/cublas_deepseek-v3.txt"
echo "end $(($(date +%s) - t0)) s"
