#!/usr/bin/env bash
# Session 25, call 3: the GPU tests call 2 left (MoeGemmGpu on the planner's new tiles, every scheme; the
# step's graph and error-word tests; the warm-up test), `moeq verify` of the shipped tables' new 24- and
# 16-row entries through Experts::apply, then M = 256 side by side with Humming on the same GPU: moeq's
# GEMMs and whole step (shipped tables), cuBLAS bf16, Humming's GEMMs and step (bench/anchors/humming_moe.py).
# Usage: v46_block24_side_by_side.sh BUILD   (env OUT; Humming's wheels in .cache-device/wheels)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
deadline=$((t0 + 560))
MOEQ_TEST_TILES="24x128/1x4x1/4/r 16x128/1x4x1/2/r" timeout 150 "$build/moeq_gpu_tests" \
  --gtest_filter='MoeGemmGpu.*:ExpertsGpu.BadRouting*:ExpertsGpu.GraphCapture*:ExpertsGpu.TuningTable*' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) " "$out/gpu_tests.txt"
{
  timeout 100 "$build/moeq_gpu_warmup_test" 2>&1 | tail -3
  timeout 70 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4 int4-g128 --layout indexed masked \
    --activation silu -M 256 200 --codes prepared 2>&1 | tail -6
  timeout 40 "$build/moeq" verify --preset gpt-oss-120b --scheme mxfp4 --layout indexed --activation swiglu-oai \
    -M 256 --codes prepared 2>&1 | tail -3
} >"$out/checks.txt" 2>&1
echo "checks $(($(date +%s) - t0)) s"
grep -E "passed|failed|PASSED|FAILED" "$out/checks.txt" | head
for case in "qwen3-30b-a3b mxfp4" "qwen3-30b-a3b int4-g128" "gpt-oss-120b mxfp4"; do
  # shellcheck disable=SC2086
  set -- $case
  timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset "$1" --scheme "$2" -M 256 256 >>"$out/layer.txt" 2>&1
  timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$1" --scheme "$2" -M 256 >>"$out/gemm.txt" 2>&1
done
echo "moeq $(($(date +%s) - t0)) s"
timeout 60 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b gpt-oss-120b --tokens 256 >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
left=$((deadline - $(date +%s) - 100))
HUMMING_TIMEOUT=$left OUT="$out/kernels" bash "$root/scripts/device/humming_anchor.sh" --preset qwen3-30b-a3b gpt-oss-120b \
  --scheme mxfp4 int4-g128 --tokens 256 >/dev/null 2>&1
echo "humming kernels rc=$? $(($(date +%s) - t0)) s"
left=$((deadline - $(date +%s)))
HUMMING_TIMEOUT=$left OUT="$out/layer" bash "$root/scripts/device/humming_anchor.sh" --layer --preset qwen3-30b-a3b \
  gpt-oss-120b --scheme mxfp4 int4-g128 --tokens 256 >/dev/null 2>&1
echo "humming layer rc=$? $(($(date +%s) - t0)) s"
