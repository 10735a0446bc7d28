#!/usr/bin/env bash
# Session 70, issue 5 at M <= 128: the GEMMs making their own FP8 per-token rows instead of a quantizer kernel.
# - The weight-slice L2 prefetch of a tile that quantizes its rows (docs/experiments/2026-12-08-prefetch-and-routed-
#   gemm1-rows.patch): session 69 (H100) had GEMM2's own rows -0.6 us a step at M = 1 but +1.0 / +1.5 us at M = 8 /
#   16, where the rows' prologue holds back the weight stream; the prefetch is meant to hide that prologue.
# - A routed GEMM1 quantizing the caller's rows (env MOEQ_GEMM1_QUANTIZES_MAX_ROWS, new here) instead of the quantizer
#   folded into route_count (+2.9 us under ncu at M = 16, session 69).
# Whole steps, Qwen3-30B-A3B MXFP4 x FP8 per token, two rounds, one process a row (env bounds 1024: every legal tile
# up to M = 128 at top_k 8):
#   O main; P main + GEMM2 rows; N patched; G patched + GEMM2 rows; R patched + GEMM1 rows; A patched + both;
#   B main with bf16 activations.
# Prediction: N = O past M = 4 (no quantizing tile there without an env); G < P by 0.5-1.5 us at M = 8-64; R < N by
# ~1 us at M = 8-32. Then `moeq verify` and the oracle tests that reach FP8 per-token GEMMs at small M (every weight
# format) with both env bounds on the patched build.
# Device command (carry: ["build_dev/head", "build_dev/new"]):
#   OUT=$OUT bash scripts/device/s70_prefetch_rows.sh build_dev/new build_dev/head
# Usage: s70_prefetch_rows.sh PATCHED MAIN [M ...]   (env OUT, MOEQ_CACHE_DIR, ROUNDS, LETTERS)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base="$2"
shift 2
ms="${*:-1 2 4 8 16 32 64 128}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
# The quantizing kernels are warmed only where an env bound asks for them.
MOEQ_GEMM1_QUANTIZES_MAX_ROWS=1024 MOEQ_GEMM2_QUANTIZES_MAX_ROWS=1024 \
  compile_layers_bg "$build/moeq" 8 qwen3-30b-a3b mxfp4:fp8-token
MOEQ_GEMM2_QUANTIZES_MAX_ROWS=1024 compile_layers_bg "$base/moeq" 8 qwen3-30b-a3b mxfp4:fp8-token mxfp4
wait
compiled_summary
step_row() {
  local who="$1" scheme=mxfp4:fp8-token bin="$build/moeq" q1="" q2=""
  case "$who" in O | P | B) bin="$base/moeq" ;; esac
  case "$who" in P | G | A) q2=1024 ;; esac
  case "$who" in R | A) q1=1024 ;; esac
  [ "$who" = B ] && scheme=mxfp4
  # shellcheck disable=SC2086
  env ${q1:+MOEQ_GEMM1_QUANTIZES_MAX_ROWS=$q1} ${q2:+MOEQ_GEMM2_QUANTIZES_MAX_ROWS=$q2} timeout 120 "$bin" bench \
    --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme "$scheme" -M $ms >"$out/o.tmp" 2>&1
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" '{print w, $3, $4, $5, $6, $8}' \
    >>"$out/steps.txt"
  grep -m1 -i "copy" "$out/o.tmp" >>"$out/copy.txt"
}
letters="${LETTERS:-O P N G R A B}"
for round in $(seq "${ROUNDS:-2}"); do
  order="$letters"
  [ "$round" = 2 ] && order="$(echo "$letters" | tr ' ' '\n' | tac | paste -sd' ')"
  for who in $order; do step_row "$who"; done
  echo "steps round $round $(($(date +%s) - t0)) s"
done
sort -k1,1 -k3,3n -s "$out/steps.txt"
head -1 "$out/copy.txt"
# Correctness with both bounds on: `moeq verify` (GPU against the CPU reference), then the oracle tests that send FP8
# per-token GEMMs of every weight format through apply at small M.
export MOEQ_GEMM1_QUANTIZES_MAX_ROWS=1024 MOEQ_GEMM2_QUANTIZES_MAX_ROWS=1024
VERIFY_ACTIVATIONS="silu swiglu-oai" layer_verify "qwen3-30b-a3b mxfp4:fp8-token 1 5 8 16 33 64 128"
left=$((570 - ($(date +%s) - t0)))
filtered_gpu_tests "ExpertsGpu.QuantizedActivationPairsMatchOracle:\
ExpertsGpu.OddShapesExpertMapAndBias:ExpertsGpu.GraphCaptureReplaysWithNewRouting:\
ExpertsGpu.BatchInvariantPrefixRowsAreBitIdentical:ExpertsGpu.RowScalesAfterKGroupsAndSplitK:\
ExpertsGpu.E4m3ActivationsOnEveryDirectTileMatchOracle:ExpertsGpu.DirectTilesOf24And32RowsMatchOracle:\
MoeGemmGpu.Gemm2QuantizingItsRows*:MoeGemmGpu.SelfRoutedGemm1QuantizingItsRows*:ExpertsGpu.EveryFormatEveryLayoutMatchesOracle" \
  $((left > 60 ? left - 45 : 30))
grep -E "^\[       OK|^\[  FAILED" "$out/gpu_tests.txt" | head -24
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
