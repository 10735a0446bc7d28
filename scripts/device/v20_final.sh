#!/usr/bin/env bash
# Session 19, the MX pass-of-2 scales on the 4-deep ring as landed (GEMM v20): every GPU test
# (MoeGemmGpu on the 8-row direct tiles whose MX kernels changed or the planner picks for MX), `moeq verify`, the
# warm-up test; then GEMM1 and GEMM2 of the planner's picks against main before (BINS/moeq_base) in
# the same call: MXFP4 on every preset at the M where the pick changed, and where it did not.
# Usage: v20_final.sh BUILD BINS   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
for b in "$build/moeq" "$bins/moeq_base"; do for p in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do
  echo "$b compile --arch sm_90a --preset $p --scheme mxfp4"
done; done | xargs -P 16 -I{} sh -c "{} 2>&1 | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
gpu_tests "8x128/1x4x1/4/r 8x128/1x4x1/4/o4/r 8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r" '*' 320
timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
echo "verify rc=$? $(tail -1 "$out/verify.txt")"
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/warmup.txt")"
bench_against_base 1 qwen3-30b-a3b mxfp4 1 4 8 10 12 16 24 32 48 64
bench_against_base 1 deepseek-v3 mxfp4 6 16
bench_against_base 1 gpt-oss-120b mxfp4 16
bench_against_base 2 qwen3-30b-a3b mxfp4 1 4 8 10 12 16 24 32 48 64
echo "done $(($(date +%s) - t0)) s"
