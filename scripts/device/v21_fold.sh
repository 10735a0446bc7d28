#!/usr/bin/env bash
# GEMM v21: the pass ring's whole-tile token loads (no K predicate) and MXFP4's fold decided per pass,
# MXFP4 on 8x128/1x4x1/4/o4/r. Correctness: MoeGemmGpu on the direct tiles whose pass ring changed,
# ExpertsGpu, `moeq verify`. Timing against BINS/moeq_base (same kernels as main before, other
# planner for MXFP4, so MXFP4 is timed on named tiles), two rounds in alternating order.
# Usage: v21_fold.sh BUILD BINS   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
mx_tiles="8x128/1x4x1/4/r 8x128/1x4x1/4/o4/r"
for b in "$build/moeq" "$bins/moeq_base"; do for p in qwen3-30b-a3b deepseek-v3; do
  echo "$b compile --arch sm_90a --preset $p --scheme mxfp4 --tile $mx_tiles"
  echo "$b compile --arch sm_90a --preset $p --scheme int4-g128"
done; done | xargs -P 16 -I{} sh -c "{} 2>&1 | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
gpu_tests "8x128/1x4x1/4/r 8x128/1x4x1/4/o4/r 8x128/1x4x1/2/r" 'MoeGemmGpu.*:ExpertsGpu.*' 330
timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
echo "verify rc=$? $(tail -1 "$out/verify.txt")"
for round in 1 2; do
  order="base new"; [ "$round" = 2 ] && order="new base"
  for v in $order; do
    moeq="$build/moeq"; [ "$v" = base ] && moeq="$bins/moeq_base"
    # shellcheck disable=SC2086
    {
      timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 -M 8 16 32 64 --tile $mx_tiles
      timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 -M 16 32 64
      timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset deepseek-v3 --scheme mxfp4 -M 16 --tile $mx_tiles
      timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset deepseek-v3 --scheme int4-g128 -M 16
    } >>"$out/${v}_r$round.txt" 2>&1
  done
  echo "round $round $(($(date +%s) - t0)) s"
done
echo "done $(($(date +%s) - t0)) s"
