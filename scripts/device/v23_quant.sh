#!/usr/bin/env bash
# Issue 5, first GPU run: quantized activations through the 16-bit GEMMs (quantize, dequantize,
# FP8 per-token row scales in the GEMM epilogue). Call A (correctness): the kernels warmed, the
# quantized-pair test, the dequantizer test, every other ExpertsGpu / Elementwise test and MoeGemmGpu
# on a few tiles (the epilogue changed in every GEMM body), `moeq verify` (16-bit) and the warm-up
# test. Call B (timing): the GEMMs against BINS/moeq_base (the epilogue's cost) and the whole step
# with bf16, FP8 per-token and MXFP8 / MXFP4 activations side by side.
# Call C does both in one call, shorter: the quantized-pair and ExpertsGpu tests, MoeGemmGpu on
# three tiles, `moeq verify`, one round of GEMMs against the base and the layers on both presets.
# Usage: v23_quant.sh BUILD BINS a|b|c   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
# correctness FILTER SECONDS: warm every test kernel, the GPU tests (MoeGemmGpu on three tiles), verify.
correctness() {
  "$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
  gpu_tests "8x128/1x4x1/4/o4/r 16x128/1x4x1/4 128x256/1x8x1/4/p" "$1" "$2"
  timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(tail -1 "$out/verify.txt")"
}
if [ "$3" = a ]; then
  correctness 'ExpertsGpu.*:ElementwiseGpu.*:MoeGemmGpu.*' 330
  timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
  echo "warmup rc=$?"
elif [ "$3" = c ]; then
  correctness 'ExpertsGpu.*:MoeGemmGpu.*' 200
  warm_layers "qwen3-30b-a3b deepseek-v3" "mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 int4-g128"
  bench_against_base 1 qwen3-30b-a3b mxfp4 16 256 4096
  bench_against_base 1 qwen3-30b-a3b int4-g128 16 256 4096
  for p in qwen3-30b-a3b deepseek-v3; do
    timeout 100 "$build/moeq" bench --trials 3 --kernel layer --preset "$p" \
      --scheme mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 -M 16 256 4096 >"$out/layer-$p.txt" 2>&1
    echo "layer $p rc=$? $(($(date +%s) - t0)) s"
  done
else
  warm_layers "qwen3-30b-a3b deepseek-v3" "mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 int4-g128 int4-g128:fp8-token"
  for round in 1 2; do
    bench_against_base "$round" qwen3-30b-a3b mxfp4 16 256 4096
    bench_against_base "$round" qwen3-30b-a3b int4-g128 16 256 4096
  done
  for p in qwen3-30b-a3b deepseek-v3; do
    timeout 150 "$build/moeq" bench --trials 5 --kernel layer --preset "$p" \
      --scheme mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 -M 16 256 4096 >>"$out/layer.txt" 2>&1
    echo "layer $p rc=$? $(($(date +%s) - t0)) s"
  done
fi
echo "done $(($(date +%s) - t0)) s"
