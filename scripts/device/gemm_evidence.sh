#!/usr/bin/env bash
# GPU evidence of the experts step (MoE GEMM) in one device call: a quick end-to-end run,
# `moeq verify`, the GPU tests of the GEMM and the experts step, the GEMM benchmark and the
# cuBLAS bf16 ceiling of the same shapes (bench/anchors/cublas_bf16.py, needs PyTorch).
# Usage: gemm_evidence.sh BUILD [PRESET...]   (default qwen3-30b-a3b)
set -u
build="${1:-build}"
shift || true
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(qwen3-30b-a3b)
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$(mktemp -d)}"
{ date -u +"date %Y-%m-%dT%H:%M:%SZ"; echo "commit ${MOEQ_COMMIT:-unknown}";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader; } >"$out/device.txt" 2>&1
cat "$out/device.txt"

if [ "${MOEQ_SKIP_CHECKS:-0}" != 1 ]; then
  "$build/moeq" run --preset tiny --tokens 7 --backend cuda --check >"$out/run_tiny.txt" 2>&1
  echo "run tiny rc=$?"; tail -2 "$out/run_tiny.txt"
  "$build/moeq" run --preset qwen3-30b-a3b --tokens 64 --backend cuda --check --threads 16 >"$out/run_qwen3.txt" 2>&1
  echo "run qwen3 rc=$?"; tail -2 "$out/run_qwen3.txt"
  "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$?"; tail -1 "$out/verify.txt"; grep FAIL "$out/verify.txt" | head -10
  timeout 300 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu*:ExpertsGpu*' >"$out/gemm_gpu_tests.txt" 2>&1
  echo "gemm/experts gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure|rel " "$out/gemm_gpu_tests.txt" | head -20
fi

for preset in "${presets[@]}"; do
  schemes=(int4-g128 mxfp4 fp8-block)
  [ "${preset#gpt-oss}" != "$preset" ] && schemes=(mxfp4 fp8-block)  # K = 2880: no 128-wide INT4 groups
  timeout 400 "$build/moeq" bench --kernel gemm1 gemm2 --preset "$preset" --scheme "${schemes[@]}" \
    --tokens 1 16 64 256 1024 4096 --trials 5 >"$out/gemm_bench_$preset.txt" 2>&1
  echo "bench $preset rc=$?"
  timeout 120 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset "$preset" >"$out/cublas_$preset.txt" 2>&1
  echo "cublas $preset rc=$?"
done
