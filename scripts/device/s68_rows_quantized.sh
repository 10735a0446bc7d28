#!/usr/bin/env bash
# Session 68, issue 5 at M <= 256: an FP8 per-token layer's direct GEMMs quantize their own input rows
# (docs/experiments/2026-12-07-fp8-rows-quantized-in-gemm.patch): GEMM2 from GEMM1's output (no activation-quantize
# kernel between the GEMMs), and the self-routed GEMM1 from the caller's rows (no quantizer in the routing's launch, so
# GEMM1 streams its weights while the routing runs). One call: the two Qwen3-30B-A3B layers compiled on 16 cores, both
# bit-equality tests and the warm-up test, `moeq verify`, then whole steps with both (N), without GEMM2's (Q:
# MOEQ_GEMM2_QUANTIZES_MAX_ROWS=0) and without self-routing (Z: MOEQ_SELF_ROUTE=0, GEMM1's quantizer back in the
# routing's launch), beside bf16.
# BUILD: the patched tree's moeq, moeq_gpu_tests and moeq_gpu_warmup_test.
# Device commands (carry: ["build_dev"]), two calls on one warm machine (the second reuses the first's kernels):
#   OUT=$OUT bash scripts/device/s68_rows_quantized.sh tests build_dev/q
#   OUT=$OUT bash scripts/device/s68_rows_quantized.sh steps build_dev/q [M ...]
# tests: the layers compiled, both bit-equality tests, the warm-up test, `moeq verify`; steps: N / Q / Z / bf16.
# Usage: s68_rows_quantized.sh tests|steps BUILD [M ...]   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
shift 2
ms="${*:-1 4 8 16 64 128}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
compile_layers_bg "$build/moeq" 8 qwen3-30b-a3b mxfp4:fp8-token mxfp4
wait
compiled_summary
if [ "$mode" = tests ]; then
  filtered_gpu_tests 'MoeGemmGpu.Gemm2QuantizingItsRows*:MoeGemmGpu.SelfRoutedGemm1QuantizingItsRows*' 300
  VERIFY_ACTIVATIONS="silu swiglu-oai" layer_verify "qwen3-30b-a3b mxfp4:fp8-token 1 4 7 16 128"
  echo "done $(($(date +%s) - t0)) s"
  exit 0
fi
export STEP_TIMEOUT=120
for round in 1 2; do
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "$ms" "Q Z N"
  layer_steps shipped qwen3-30b-a3b mxfp4 "$ms" N
done
cat "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
