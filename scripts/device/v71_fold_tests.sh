#!/usr/bin/env bash
# Session 31, call 2: GEMM1's input quantizer folded into the routing's first launch.
# (1) GPU tests of what it touches: the fold against the quantizer's own launch on every routing path,
#     the quantized layers against the reference (every pair, layout), routing, elementwise; then the
#     warm-up test (no compile after Experts::warm_up: the folded routing kernels are in its list).
# (2) The step, this build against BINS/moeq_base (37dd879, the quantizer in its own launch), Qwen3-30B-A3B
#     MXFP4 with FP8 per-token and bf16 activations, A B B A, M = 16 / 256 / 4096 (first line dropped).
# Usage: v71_fold_tests.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
gpu_tests "" 'FoldedQuantizerGpu.*:ExpertsGpu.*:RoutingGpu.*:ElementwiseGpu.*:-RoutingGpu.PrintsTimings' 300
grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 2500; echo
timeout 90 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
tail -2 "$out/warmup.txt"
for binary in moeq moeq_base moeq_base moeq; do
  timeout 60 "$build/$binary" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token mxfp4 \
    -M 16 16 256 4096 >"$out/l.tmp" 2>&1
  echo "rc=$? $binary" >>"$out/steps.txt"
  grep -E '^layer  ' "$out/l.tmp" | tail -n +2 | sed "s/^/$binary /" >>"$out/steps.txt"
  echo "step $binary $(($(date +%s) - t0)) s"
done
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
