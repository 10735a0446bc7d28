#!/usr/bin/env bash
# Session 17, last call: INT4's per-pass scales (GEMM v18) as landed. Every GPU test (MoeGemmGpu on the
# planner's 8-row direct tiles), `moeq verify`, the warm-up test; then GEMM1 and GEMM2 against the tree
# before (BINS/moeq_base) in the same call: INT4 two rounds, MXFP4 one (its kernels must not change).
# Usage: v18_final.sh BUILD BINS   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
for b in "$build/moeq" "$bins/moeq_base"; do for s in int4-g128 mxfp4; do
  echo "$b compile --arch sm_90a --preset qwen3-30b-a3b --scheme $s"
done; done | xargs -P 8 -I{} sh -c "{} 2>&1 | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
gpu_tests "8x128/1x4x1/4/o4/r 8x32/1x1x4/4/o4/r 8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r" '*' 230
timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
echo "verify rc=$? $(tail -1 "$out/verify.txt")"
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/warmup.txt")"
ab() {  # ab ROUND SCHEME
  for which in base new; do
    moeq="$build/moeq"; [ $which = base ] && moeq="$bins/moeq_base"
    timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme "$2" -M 1 4 8 16 32 64 \
      >>"$out/$which$1.txt" 2>&1
  done
  echo "bench $1 $2 $(($(date +%s) - t0)) s"
}
ab 1 int4-g128
ab 1 mxfp4
ab 2 int4-g128
echo "done $(($(date +%s) - t0)) s"
