#!/usr/bin/env bash
# Session 69, issue 5 at M <= 16: the direct GEMMs' own FP8 per-token rows made by every warp of the CTA
# (BlockRowsWalk in kernels/direct_row_quantize.cuh) instead of a warp a row. Session 69's ncu split (H100, Qwen3-30B-
# A3B MXFP4, M = 1) put the self-routed FP8 GEMM1 at 14.9 us against bf16's 10.9: at M = 1 a block holds one real row,
# which one warp quantized while three waited. Predicted: the FP8 GEMM1 -1 to -2 us alone (ncu), the step -0.5 to -1.5
# us at M = 1-4; GEMM2 quantizing its rows (G: MOEQ_GEMM2_QUANTIZES_MAX_ROWS=128), +0.4 to +0.9 us against the
# activation-quantize kernel in session 68, now even or better at M = 1-4.
# One call: both layers compiled (and main's FP8 layer), both bit-equality tests and the warm-up test, `moeq verify`
# with and without G, whole steps O / N / G and bf16 (two rounds), then ncu per kernel at M = 1 (new N and G).
# Device command (carry: ["build_dev/new", "build_dev/base"]: this build's moeq and test binaries, main's moeq):
#   OUT=$OUT bash scripts/device/s69_rows_walk.sh build_dev/new build_dev/base
# SHORT=1 (a short budget): no verify without G; ROUNDS=1: one round of steps.
# Usage: s69_rows_walk.sh BUILD BASE [M ...]   (env OUT, MOEQ_CACHE_DIR, SHORT, ROUNDS)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base="$2"
shift 2
ms="${*:-1 2 4 8 16 64}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
compile_layers_bg "$build/moeq" 6 qwen3-30b-a3b mxfp4:fp8-token mxfp4
compile_layers_bg "$base/moeq" 4 qwen3-30b-a3b mxfp4:fp8-token
wait
compiled_summary
filtered_gpu_tests 'MoeGemmGpu.Gemm2QuantizingItsRows*:MoeGemmGpu.SelfRoutedGemm1QuantizingItsRows*' 300
[ "${SHORT:-0}" = 1 ] || VERIFY_ACTIVATIONS="silu swiglu-oai" layer_verify "qwen3-30b-a3b mxfp4:fp8-token 1 4 16"
MOEQ_GEMM2_QUANTIZES_MAX_ROWS=128 VERIFY_ACTIVATIONS="silu swiglu-oai" layer_verify "qwen3-30b-a3b mxfp4:fp8-token 1 4 7 16 128"
# Whole steps: O (main), N (this build), G (N with GEMM2 quantizing its rows), bf16 on this build.
step_row() {
  local who="$1" scheme="$2" bin="$build/moeq" q=""
  [ "$who" = O ] && bin="$base/moeq"
  [ "$who" = G ] && q=128
  env ${q:+MOEQ_GEMM2_QUANTIZES_MAX_ROWS=$q} timeout 120 "$bin" bench --trials 5 --kernel layer --preset qwen3-30b-a3b \
    --scheme "$scheme" -M $ms >"$out/o.tmp" 2>&1
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" '{print w, $3, $4, $5, $6, $8}' \
    >>"$out/steps.txt"
}
for round in $(seq "${ROUNDS:-2}"); do
  if [ $round = 1 ]; then order="O N G"; else order="G N O"; fi
  for who in $order; do step_row "$who" mxfp4:fp8-token; done
  step_row B mxfp4
  echo "steps round $round $(($(date +%s) - t0)) s"
done
# ncu: every kernel of one step at M = 1, the median of each kernel's launches.
for who in N G; do
  bin="$build/moeq"; [ "$who" = O ] && bin="$base/moeq"
  q=""; [ "$who" = G ] && q=128
  env ${q:+MOEQ_GEMM2_QUANTIZES_MAX_ROWS=$q} timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    "$bin" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 1 >"$out/ncu_$who.csv" 2>&1
  echo "ncu $who M=1 rc=$?: $(ncu_kernel_medians "$out/ncu_$who.csv")"
done
echo "ncu $(($(date +%s) - t0)) s"
sort -k1,1 -k3,3n -s "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
