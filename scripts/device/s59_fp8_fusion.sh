#!/usr/bin/env bash
# Issue 5: GEMM1 of FP8 per-token layers with the activation in its epilogue (row scales before it), then the
# quantizer alone (d019501; the patch docs/experiments/2026-12-06-fp8-token-activation-epilogue.patch, measured and
# deleted in session 60, is in git at b5dd655), against the activation-quantize kernel (MOEQ_FUSED_ACTIVATION=0,
# letter A) and against
# the bf16 step. Part `check`: the epilogue's bit-equality test (row-scaled cases added), the quantized pairs' oracle
# test (every weight format x 3 layouts, now fused on their direct tiles), the e4m3 and `/t` oracle tests, the
# warm-up test, and `moeq verify` on the issue's layers. Part `time`: whole steps, shipped tables, Qwen3-30B-A3B and
# DeepSeek-V3 MXFP4, M = 16 / 256 / 4096, as bf16 | FP8 A N N A | bf16 (Qwen3; DeepSeek-V3 bf16 | A N), one process each.
# Prediction: Qwen3 M = 4096 N - A ~ -20 to -30 us of ~820 (GEMM1 writes half, the pass reads half); M = 256 ~ -2 us;
# M = 16 ~ 0 (a kernel still follows GEMM1). DeepSeek-V3 similar in bytes per row, smaller relatively.
# Part `both`: Qwen3's steps and the two tests that cover the change, in one call.
# Part `all` (session 60, one call on a flaky device): `check`, then Qwen3's half of `time`.
# Usage: s59_fp8_fusion.sh check|time|both|all BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$part" = check ] || [ "$part" = all ]; then
  filtered_gpu_tests 'MoeGemmGpu.ActivationEpilogue*:ElementwiseGpu.ActivationQuantize*:ExpertsGpu.QuantizedActivationPairsMatchOracle:ExpertsGpu.E4m3*:ExpertsGpu.MmaOrderTilesMatchOracle' 420
  layer_verify "qwen3-30b-a3b mxfp4:fp8-token 16 256 1024" "deepseek-v3 mxfp4:fp8-token 16 256"
  if [ "$part" = all ]; then
    export STEP_TIMEOUT=90
    layer_steps shipped qwen3-30b-a3b mxfp4 "16 256 4096" "N"
    layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "16 256 4096" "A N N A"
    layer_steps shipped qwen3-30b-a3b mxfp4 "16 256 4096" "N"
  fi
elif [ "$part" = both ]; then
  # One call on a short budget: Qwen3's steps, then the two tests that cover the change.
  export STEP_TIMEOUT=60
  layer_steps shipped qwen3-30b-a3b mxfp4 "16 256 4096" "N"
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "16 256 4096" "A N A"
  filtered_gpu_tests 'MoeGemmGpu.ActivationEpilogue*:ElementwiseGpu.ActivationQuantize*:ExpertsGpu.QuantizedActivationPairsMatchOracle' 150
else
  export STEP_TIMEOUT=120
  layer_steps shipped qwen3-30b-a3b mxfp4 "16 256 4096" "N"
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "16 256 4096" "A N N A"
  layer_steps shipped qwen3-30b-a3b mxfp4 "16 256 4096" "N"
  # DeepSeek-V3's steps take ~3x as long: one process each.
  layer_steps shipped deepseek-v3 mxfp4 "16 256 4096" "N"
  layer_steps shipped deepseek-v3 mxfp4:fp8-token "16 256 4096" "A N"
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
