#!/usr/bin/env bash
# One call for what session 50 could not spread over several (the lender started few machines): GEMM2 with the top-k
# reduce fused at the few slots of the one-kernel routing (BUILD, against MOEQ_FUSED_REDUCE=0 in the same binary), the
# self-routing rule that landed in f023651 (Mixtral-8x7B M = 4 against OLD_BUILD = 338ac7c), then the guide's bar and
# issue 6's side by side with Humming in the time left.
#  1. GPU tests: the fused reduce's bit equality with GEMM2 + topk_reduce, the self-routed GEMM1's, odd shapes with
#     expert_map -1 (M = 1: the fused path), bad routing values, graph capture, the warm-up test. (Not every format's
#     ExpertsGpu test: its ~150 tiny-layer kernels would compile here one by one.)
#  2. Whole steps F N N F (F: fused reduce off) at M = 1-2, and O F N N F O at Mixtral M = 1 / 2 / 4; `moeq verify` of
#     those layers and of tiny layers of five more formats at M = 1-2 (the fused path on each format's 8-row tile).
#  3. The bar: Qwen3-30B-A3B INT4-g128 GEMM1 / GEMM2 and cuBLAS bf16 at M = 1-4096; whole steps of the issue's layers.
#  4. Humming (GEMMs on the bar's shapes, then whole steps), each part cut to the call's remaining time.
# Prediction: the fused reduce -0.5 to -2 us a step at M = 1 (the reduce's marginal cost was 2.4 us at Qwen3 M = 1 on
# an H200; its fences and atomics add a tail to GEMM2's last CTAs); Mixtral M = 4 N within 0.5% of O.
# Usage: s50_fused_reduce_final.sh BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR, CALL_SECONDS: 560)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_build="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
end=$((t0 + ${CALL_SECONDS:-560}))
left() { echo $((end - $(date +%s))); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
{
  timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.FusedReduce*:MoeGemmGpu.SelfRouted*:ExpertsGpu.OddShapes*:ExpertsGpu.BadRoutingValues*:ExpertsGpu.GraphCapture*'
  echo "gpu tests rc=$?"
  timeout 60 "$build/moeq_gpu_warmup_test"
  echo "warmup test rc=$?"
} >"$out/gpu_tests.txt" 2>&1
echo "gpu tests $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|rc=" "$out/gpu_tests.txt" | head -14
layer_steps shipped qwen3-30b-a3b mxfp4 "1 2" "F N N F"
layer_steps shipped qwen3-30b-a3b int4-g128 "1" "F N N F"
layer_steps shipped gpt-oss-120b mxfp4 "1 2" "F N N F"
layer_steps shipped mixtral-8x7b mxfp4 "1 2 4" "O F N N F O"
layer_verify "qwen3-30b-a3b int4-g128 1" "gpt-oss-120b mxfp4 1 2" "mixtral-8x7b mxfp4 1 4" "tiny nvfp4 1 2" \
  "tiny fp8-block 1 2" "tiny int8-ch 1 2" "tiny mxfp8 1 2" "tiny int4-g128:f16 1 2"
bar="1 16 64 256 4096"
# The rest only as the call's time allows (the lender may give a shorter call than 600 s).
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
humming() {  # NAME ARGS...: humming_anchor.sh with the time left (at least 20 s), into humming_NAME.txt
  local name="$1" seconds
  shift
  seconds=$(left)
  [ "$seconds" -lt 20 ] && { echo "humming $name skipped: $seconds s left"; return; }
  mkdir -p "$out/h"
  HUMMING_TIMEOUT=$seconds OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" "$@" >/dev/null 2>&1
  echo "humming $name rc=$? $(($(date +%s) - t0)) s"
  mv "$out/h/humming.txt" "$out/humming_$name.txt" 2>/dev/null
  rmdir "$out/h" 2>/dev/null
}
# shellcheck disable=SC2086
humming gemm --preset qwen3-30b-a3b --scheme int4-g128 --tokens $bar
humming layer_qwen3 --layer --preset qwen3-30b-a3b --scheme int4-g128 mxfp4 --tokens 1 16 64 256 1024 4096
humming layer_gpt_oss --layer --preset gpt-oss-120b --scheme mxfp4 --tokens 1 16 64 256 640 1024
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
