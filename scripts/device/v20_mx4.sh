#!/usr/bin/env bash
# MXFP4 scales per pass of 2 K tiles on the 4-deep direct ring (docs/experiments/2026-12-02-mxfp4-pass-scales-4deep.patch):
# MoeGemmGpu of the patched build on the 8-row tiles that take or skip the path, then MXFP4 GEMM1 and
# GEMM2 of main (BINS/moeq_base) and the patch (BINS/moeq_mx4) on the 2-deep, 4-deep and 64-channel
# tiles, two rounds in alternating order.
# Usage: v20_mx4.sh BINS BUILD   (BUILD: the patched build; env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$2"
bins="$1"
tiles="8x128/1x4x1/2/r 8x128/1x4x1/4/r 8x256/1x4x1/2/r"
for v in base mx4; do for p in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do for t in $tiles; do
  echo "$bins/moeq_$v compile --arch sm_90a --preset $p --scheme mxfp4 --tile $t"
done; done; done | xargs -P 16 -I{} sh -c "{} 2>&1 | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
gpu_tests "8x128/1x4x1/4/r 8x128/1x4x1/4/o4/r 8x128/1x4x1/2/r" 'MoeGemmGpu.*' 200
for round in 1 2; do
  order="base mx4"; [ "$round" = 2 ] && order="mx4 base"
  for v in $order; do
    # shellcheck disable=SC2086
    {
      timeout 100 "$bins/moeq_$v" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 \
        -M 8 12 16 24 32 64 --tile $tiles
      timeout 100 "$bins/moeq_$v" bench --trials 5 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 \
        -M 16 64 --tile $tiles
      timeout 100 "$bins/moeq_$v" bench --trials 5 --kernel gemm1 gemm2 --preset deepseek-v3 --scheme mxfp4 \
        -M 16 --tile $tiles
    } >>"$out/${v}_r$round.txt" 2>&1
  done
  echo "round $round $(($(date +%s) - t0)) s"
done
echo "done $(($(date +%s) - t0)) s"
