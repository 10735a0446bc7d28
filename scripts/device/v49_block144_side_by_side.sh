#!/usr/bin/env bash
# Session 26, call 3: the MoeGemmGpu tests call 2 left, then M = 4096 side by side with Humming on the same
# GPU, with the shipped tables' new 144-row entries: moeq's GEMMs and whole step, cuBLAS bf16, Humming's
# GEMMs and step (bench/anchors/humming_moe.py).
# Usage: v49_block144_side_by_side.sh BUILD   (env OUT; Humming's wheels in .cache-device/wheels)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
deadline=$((t0 + 555))
timeout 60 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.Int4PassScales*:MoeGemmGpu.Fp8BlockLargeScales*' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[       OK" "$out/gpu_tests.txt"
for case in "qwen3-30b-a3b mxfp4" "qwen3-30b-a3b int4-g128" "gpt-oss-120b mxfp4"; do
  # shellcheck disable=SC2086
  set -- $case
  timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset "$1" --scheme "$2" -M 4096 4096 >>"$out/layer.txt" 2>&1
  timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$1" --scheme "$2" -M 4096 >>"$out/gemm.txt" 2>&1
done
echo "moeq $(($(date +%s) - t0)) s"
timeout 60 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b gpt-oss-120b --tokens 4096 >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
left=$((deadline - $(date +%s) - 150))
HUMMING_TIMEOUT=$left OUT="$out/kernels" bash "$root/scripts/device/humming_anchor.sh" --preset qwen3-30b-a3b gpt-oss-120b \
  --scheme mxfp4 int4-g128 --tokens 4096 >/dev/null 2>&1
echo "humming kernels rc=$? $(($(date +%s) - t0)) s"
left=$((deadline - $(date +%s)))
HUMMING_TIMEOUT=$left OUT="$out/layer" bash "$root/scripts/device/humming_anchor.sh" --layer --preset qwen3-30b-a3b \
  gpt-oss-120b --scheme mxfp4 int4-g128 --tokens 4096 >/dev/null 2>&1
echo "humming layer rc=$? $(($(date +%s) - t0)) s"
