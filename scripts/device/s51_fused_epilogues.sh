#!/usr/bin/env bash
# Session 51's call (call 1 of bench/results/2026-12-06-h200-fused-epilogues.md; BUILD had session 50's fused-reduce
# patch, since dropped, so later builds ignore MOEQ_FUSED_REDUCE): at the smallest M, GEMM2 sums the top k itself and
# GEMM1 applies the activation in its epilogue, on BUILD against each turned off in the same binary, and Mixtral-8x7B
# against OLD_BUILD (338ac7c: before self-routing, so its M = 4 checks session 50's rule); then the guide's bar and the
# issue's layers with the shipped tables as time allows.
#  1. GPU tests: each fused kernel's bit equality with its unfused pair, the self-routed GEMM1's, odd shapes with
#     expert_map -1 (M = 1: both fused paths), bad routing values, graph capture, the warm-up test.
#  2. Whole steps B F A N N A F B at M = 1-64 (B: neither fusion, F: the reduce's off, A: the activation's off; the reduce
#     fuses at M <= 2 only), B A N N A B on Qwen3 INT4-g128 M = 1-160, O B N N B O at Mixtral M = 1 / 2 / 4; `moeq verify` (silu, interleaved swiglu-oai, gelu-no-mul; three layouts) of those layers
#     and of tiny layers of five more formats at M = 1-2.
#  3. The bar: Qwen3-30B-A3B INT4-g128 GEMM1 / GEMM2 and cuBLAS bf16 at M = 1-4096; whole steps of the issue's layers.
# Prediction (M = 1, per step): the fused reduce -0.5 to -2 us, the activation epilogue -0.8 to -1.5 us (the
# activation kernel's marginal cost was ~1.5 us at Qwen3 M = 1; the epilogue adds 8 rows x BN / 2 outputs per CTA);
# at M = 16-160 the activation epilogue -1 to -3 us (a launch and a pass over [rows, 2I] fewer), never a loss.
# Usage: s51_fused_epilogues.sh BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR, CALL_SECONDS: 550)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_build="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
end=$((t0 + ${CALL_SECONDS:-550}))
left() { echo $((end - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
filtered_gpu_tests 'MoeGemmGpu.FusedReduce*:MoeGemmGpu.ActivationEpilogue*:MoeGemmGpu.SelfRouted*:ExpertsGpu.OddShapes*:ExpertsGpu.BadRoutingValues*:ExpertsGpu.GraphCapture*' 240
# The activation epilogue runs wherever GEMM1 has an 8-row direct tile: the INT4 table's up to M = 160.
layer_steps shipped qwen3-30b-a3b mxfp4 "1 2 16 64" "B F A N N A F B"
layer_steps shipped gpt-oss-120b mxfp4 "1 2 16" "B F A N N A F B"
layer_steps shipped qwen3-30b-a3b int4-g128 "1 16 64 160" "B A N N A B"
layer_steps shipped mixtral-8x7b mxfp4 "1 2 4" "O B N N B O"
VERIFY_ACTIVATIONS="silu swiglu-oai gelu-no-mul" layer_verify "qwen3-30b-a3b int4-g128 1" "gpt-oss-120b mxfp4 1 2" \
  "mixtral-8x7b mxfp4 1 4" "tiny nvfp4 1 2" "tiny fp8-block 1 2" "tiny int8-ch 1 2" "tiny mxfp8 1 2" "tiny int4-g128:f16 1 2"
bar="1 16 64 256 4096"
if [ "$(left)" -gt 60 ]; then
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 -M $bar \
    >"$out/moeq_gemm.txt" 2>&1
  echo "bar gemms rc=$? $(($(date +%s) - t0)) s"
  # shellcheck disable=SC2086
  timeout 60 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b --tokens $bar >"$out/cublas.txt" 2>&1
  echo "cublas rc=$? $(($(date +%s) - t0)) s"
fi
if [ "$(left)" -gt 90 ]; then
  {
    timeout 70 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme int4-g128 mxfp4 \
      -M 1 16 64 256 1024 4096
    timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M 1 16 64 256 640 1024
  } >"$out/moeq_layer.txt" 2>&1
  echo "layers rc=$? $(($(date +%s) - t0)) s"
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
