#!/usr/bin/env bash
# The e4m3 GEMMs' own gain (FP8 per channel x FP8 per token on the same layer with and without
# Options::fp8_tensor_cores), the no_fp8_tensor_cores and quantized-pair GPU tests, and ncu's
# per-kernel durations of Qwen3 MXFP4 steps at M = 16 and 256 (bf16 against FP8 per-token
# activations: where the quantized step's extra time goes at small M).
# Usage: v27_values_vs_e4m3.sh BUILD   (env OUT; kernels compiled on the workstation into the
# carried .cache-device, BUILD holding the binaries alone)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
timeout 200 "$build/moeq_gpu_tests" \
  --gtest_filter='ExpertsGpu.E4m3ActivationsOnEveryDirectTileMatchOracle:ExpertsGpu.QuantizedActivationPairsMatchOracle' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel |^\[       OK" "$out/gpu_tests.txt" | head -20
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
for flag in "" --no-fp8-tensor-cores "" --no-fp8-tensor-cores; do
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme fp8-channel:fp8-token \
    -M 16 64 256 $flag >>"$out/layer.txt" 2>&1
  echo "layer '$flag' rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^layer  qwen" "$out/layer.txt" | awk '{print $3, $4, $5, $8}'
for scheme in mxfp4 mxfp4:fp8-token; do
  for m in 16 256; do
    f="$out/ncu-${scheme/:/-}-$m.txt"
    timeout 50 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run --preset qwen3-30b-a3b \
      --scheme "$scheme" -M "$m" >"$f" 2>&1
    echo "ncu $scheme $m rc=$? $(($(date +%s) - t0)) s"
    awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $(NF-1), $NF}' "$f" | head -8
  done
done
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
