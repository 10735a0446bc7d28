#!/usr/bin/env bash
# FP8 per-token quantizers with one vector per lane (warps_per_row up to 8 by the row's length):
# Qwen3 at M = 16 the GEMM1 input quantizer took 7.0 us and GEMM2's fused activation-quantize
# 12.5 us (ncu), flat up to M = 256. One call: layers new / base / new / base (mxfp4:fp8-token at
# M = 16, 256, 4096; bf16 in the same processes), ncu of the new step at M = 16, 256 and 4096,
# then the quantizer tests.
# Usage: v28_quantizer_warps.sh BUILD BASE_MOEQ   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
touch "$out/.start"
layer_against_base "$base_moeq" --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token -M 16 256 4096
ncu_step_times "--preset qwen3-30b-a3b --scheme mxfp4:fp8-token" 16 256 4096
timeout 260 "$build/moeq_gpu_tests" --gtest_filter='ElementwiseGpu.Quantize*:ElementwiseGpu.ActivationQuantize*:ExpertsGpu.QuantizedActivationPairsMatchOracle' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|^\[       OK" "$out/gpu_tests.txt" | head -20
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
