#!/usr/bin/env bash
# Session 69, issue 5 at M <= 16: first the FP8 per-token encode shared by the quantizers and the GEMMs' own rows
# (encode_finite_fp8_token_x8): the quantizer tests, both bit-equality tests, the folded quantizer's, the quantized
# pairs against the oracle, the warm-up test and `moeq verify`. Then where the FP8 per-token step's gap over bf16 goes (Qwen3-30B-A3B MXFP4;
# 7.4 us at M = 1 on an H100 in session 68). Both layers compiled on 16 cores, then every kernel of one `moeq run`
# step per scheme under ncu (s68_small_m_kernels.sh: each kernel alone, caches flushed, clocks left alone), then whole
# steps of both schemes, two rounds (shipped tables, prepared codes).
# Device command (carry: ["build"]): OUT=$OUT bash scripts/device/s69_small_m_split.sh build [M ...]
# Usage: s69_small_m_split.sh BUILD [M ...]   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
shift
ms="${*:-1 4 16 64 256}"
here="$(cd "$(dirname "$0")" && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
compile_layers_bg "$build/moeq" 8 qwen3-30b-a3b mxfp4:fp8-token mxfp4
wait
compiled_summary
filtered_gpu_tests 'ElementwiseGpu.*:FoldedQuantizerGpu.*:MoeGemmGpu.Gemm2QuantizingItsRows*:MoeGemmGpu.SelfRoutedGemm1QuantizingItsRows*:ExpertsGpu.QuantizedActivationPairsMatchOracle' 300
VERIFY_ACTIVATIONS="silu swiglu-oai" layer_verify "qwen3-30b-a3b mxfp4:fp8-token 1 4 7 16 128"
OUT="$out" bash "$here/s68_small_m_kernels.sh" "$build/moeq" 1 16
for f in "$out"/step_*.csv; do echo "$(basename "$f"): $(ncu_kernel_medians "$f")"; done
echo "ncu $(($(date +%s) - t0)) s"
export STEP_TIMEOUT=120
for round in 1 2; do
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "$ms" N
  layer_steps shipped qwen3-30b-a3b mxfp4 "$ms" N
done
cat "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
