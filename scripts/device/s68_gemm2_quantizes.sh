#!/usr/bin/env bash
# Session 68, issue 5 at M <= 256: an FP8 per-token layer's direct GEMM2 makes its input from GEMM1's rows itself
# (MoeGemmArgs::quantize_rows), so no kernel runs between the GEMMs at the smallest M. One call: the two Qwen3-30B-A3B
# layers compiled on 16 cores, the kernel's bit-equality test and the warm-up test, `moeq verify`, then whole steps with
# it (N) and without it (Q: MOEQ_GEMM2_QUANTIZES_MAX_ROWS=0, the activation-quantize kernel), beside bf16.
# Device command (carry: ["build_dev"]): OUT=$OUT bash scripts/device/s68_gemm2_quantizes.sh build_dev/q
# Usage: s68_gemm2_quantizes.sh BUILD [M ...]   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
shift
ms="${*:-1 8 16 32 64 128}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for s in mxfp4:fp8-token mxfp4; do
  "$build/moeq" compile -j 8 --preset qwen3-30b-a3b --scheme $s >"$out/compile_${s%%:*}${s#*:}.txt" 2>&1 &
done
wait
echo "compiled $(($(date +%s) - t0)) s: $(tail -qn1 "$out"/compile_*.txt | paste -sd';')"
filtered_gpu_tests 'MoeGemmGpu.Gemm2QuantizingItsRows*' 200
VERIFY_ACTIVATIONS="silu swiglu-oai" layer_verify "qwen3-30b-a3b mxfp4:fp8-token 1 7 16 128"
export STEP_TIMEOUT=120
for round in 1 2; do
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "$ms" "Q N"
  layer_steps shipped qwen3-30b-a3b mxfp4 "$ms" N
done
cat "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
