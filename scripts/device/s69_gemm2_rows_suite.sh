#!/usr/bin/env bash
# Session 69's condition for turning GEMM2's own rows on by default (kQuantizingGemm2MaxRows = 16): the whole GPU
# suite and the warm-up test with MOEQ_GEMM2_QUANTIZES_MAX_ROWS=16, so that the oracle tests (ExpertsGpu: every
# quantized pair, odd shapes, expert maps, graph capture) send every weight format's FP8 per-token GEMM2 through it at
# the smallest M. If both pass, set the constant to 16 (its PERF note has the figures) and land it.
# Device command (carry: ["build_dev/base"] holding moeq_gpu_tests and moeq_gpu_warmup_test of main, or ["build"]):
#   OUT=$OUT bash scripts/device/s69_gemm2_rows_suite.sh BUILD
# Usage: s69_gemm2_rows_suite.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export MOEQ_GEMM2_QUANTIZES_MAX_ROWS=16
filtered_gpu_tests '*' 540
grep -E "^\[  FAILED" "$out/gpu_tests.txt" | head -20
echo "done $(($(date +%s) - t0)) s"
