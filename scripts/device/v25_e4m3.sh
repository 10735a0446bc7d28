#!/usr/bin/env bash
# Issue 5 step 2, first body: FP8 per-channel weights x FP8 per-token activations on the e4m3
# tensor cores (direct tiles, GemmInput::row_scaled_e4m3), and a look at why the FP8 per-token
# layer with MXFP4 weights stayed ~150 us behind the MX-activation ones at Qwen3 M = 4096
# (bench/results/2026-12-02-h200-quant-fused.md).
# One call: warm the layers, the e4m3 test, the warm-up test (its quantized cases run the reshaped
# values path in the three layouts), the layers timed (e4m3 against bf16 activations, two orders),
# then ncu's per-kernel durations of one Qwen3 M = 4096 step for mxfp4:fp8-token and mxfp4:mxfp8.
# Usage: v25_e4m3.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
warm_layers "tiny qwen3-30b-a3b" "fp8-channel:fp8-token fp8-channel mxfp4:fp8-token mxfp4:mxfp8"
timeout 120 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.E4m3ActivationsOnEveryDirectTileMatchOracle' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -20
timeout 90 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$out/warmup.txt" | head
for order in "fp8-channel fp8-channel:fp8-token" "fp8-channel:fp8-token fp8-channel"; do
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme $order -M 16 64 256 \
    >>"$out/layer.txt" 2>&1
  echo "layer rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^layer  qwen" "$out/layer.txt" | awk '{print $3, $4, $5, $8}'
for scheme in mxfp4:fp8-token mxfp4:mxfp8; do
  timeout 50 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run --preset qwen3-30b-a3b \
    --scheme "$scheme" -M 4096 >"$out/ncu-${scheme/:/-}.txt" 2>&1
  echo "ncu $scheme rc=$? $(($(date +%s) - t0)) s"
  grep -E "moeq_|gpu__time_duration" "$out/ncu-${scheme/:/-}.txt" | paste - - | awk '{print $1, $(NF)}' | head -20
done
echo "done $(($(date +%s) - t0)) s"
