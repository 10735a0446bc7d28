#!/usr/bin/env bash
# GEMM1 with the activation in its epilogue (session 27; the tree of commit 1276bf7, whose code was reverted after
# the measurement, bench/results/2026-12-03-h200-layouts.md), first call: the device headers changed, so the kernel
# cache is rebuilt here on 16 cores (the tests' kernels and the benchmarked layers'), then every ExpertsGpu test
# (FusedActivationIsBitIdenticalToTheActivationKernel among them; when this ran, fusion was on by default, so
# every warp-specialized case with 16-bit activations outside the contiguous layout ran fused), MoeGemmGpu on the warp-specialized tiles (their
# producer and Fp8BlockFoldable code changed for the split), and the warm-up test.
# Usage: v55_fused_activation_tests.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
timeout 300 bash "$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
echo "warm_parallel rc=$? $(($(date +%s) - t0)) s"
warm_layers "qwen3-30b-a3b gpt-oss-120b" "mxfp4 int4-g128"
timeout 240 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.*' >"$out/experts_gpu.txt" 2>&1
echo "ExpertsGpu rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]" "$out/experts_gpu.txt" | head -30
gpu_tests "128x256/1x8x1/4/p 144x256/1x8x1/4/p 80x256/1x8x1/6/p 64x256/1x8x1/8/p 144x128/1x8x1/4/p" 'MoeGemmGpu.*' 150
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"; tail -3 "$out/warmup.txt"
