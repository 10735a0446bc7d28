#!/usr/bin/env bash
# Session 11, call A: the memory-bound GEMMs against a copy of their own size (`% sized` of
# `moeq bench`), Qwen3-30B-A3B, gpt-oss-120b and DeepSeek-V3 at M = 1-256, then Nsight Compute of
# the M = 4096 warp-specialized tile, FP8-block (with the per-instruction page) and INT4.
# Usage: v12_sized.sh BUILD   (BUILD holds moeq; env OUT)
set -u
build="$1"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
t0=$(date +%s)
{
  for preset in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do
    for scheme in int4-g128 mxfp4 fp8-block; do echo "--preset $preset --scheme $scheme"; done
  done
} | xargs -P 9 -L 1 sh -c "\"$build/moeq\" compile --arch sm_90a \$0 \"\$@\" | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
timeout 200 "$build/moeq" bench --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 mxfp4 fp8-block \
  -M 1 16 64 256 >"$out/bench_qwen3.txt" 2>&1
echo "bench qwen3 rc=$? $(($(date +%s) - t0)) s"
timeout 100 "$build/moeq" bench --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M 16 64 \
  >"$out/bench_gptoss.txt" 2>&1
echo "bench gpt-oss rc=$? $(($(date +%s) - t0)) s"
timeout 150 "$build/moeq" bench --kernel gemm1 --preset deepseek-v3 --scheme int4-g128 fp8-block -M 16 64 \
  >"$out/bench_deepseek.txt" 2>&1
echo "bench deepseek rc=$? $(($(date +%s) - t0)) s"
grep -hE "^copy|^gemm" "$out"/bench_*.txt | cut -c1-150
OUT="$out" SASS=1 "$(dirname "$0")/ncu_gemm.sh" "$build/moeq" "qwen3-30b-a3b fp8-block 4096 gemm1"
OUT="$out" "$(dirname "$0")/ncu_gemm.sh" "$build/moeq" "qwen3-30b-a3b int4-g128 4096 gemm1"
echo "end $(($(date +%s) - t0)) s"
