#!/usr/bin/env bash
# GPU evidence of the experts step (MoE GEMM) in one device call: a quick end-to-end run,
# `moeq verify`, the GPU test suite of the experts step, then the GEMM benchmark.
set -u
build="${1:-build}"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$(mktemp -d)}"
{ date -u +"date %Y-%m-%dT%H:%M:%SZ"; echo "commit ${MOEQ_COMMIT:-unknown}";
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader; } >"$out/device.txt" 2>&1
cat "$out/device.txt"

"$build/moeq" run --preset tiny --tokens 7 --backend cuda --check >"$out/run_tiny.txt" 2>&1
echo "run tiny rc=$?"; cat "$out/run_tiny.txt" | tail -4
"$build/moeq" run --preset qwen3-30b-a3b --tokens 64 --backend cuda --check --threads 16 >"$out/run_qwen3.txt" 2>&1
echo "run qwen3 rc=$?"; tail -5 "$out/run_qwen3.txt"

"$build/moeq" verify >"$out/verify.txt" 2>&1
echo "verify rc=$?"; tail -3 "$out/verify.txt"; grep FAIL "$out/verify.txt" | head -10

timeout 300 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu*:ExpertsGpu*' >"$out/experts_gpu.txt" 2>&1
echo "experts gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |Failure|rel " "$out/experts_gpu.txt" | head -20

timeout 200 "$build/moeq" bench --kernel gemm1 gemm2 --preset qwen3-30b-a3b --tokens 1 16 64 256 1024 4096 "${@:2}" >"$out/gemm_bench.txt" 2>&1
echo "bench rc=$?"; cat "$out/gemm_bench.txt"
