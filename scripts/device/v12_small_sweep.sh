#!/usr/bin/env bash
# Session 11, call G: the copy-warp tiles at M = 16-256 for 4-bit codes (Qwen3-30B-A3B GEMM1 and GEMM2,
# INT4 and MXFP4), including `8x128/1x8x1/4/p` (8 warps of 16 channels, the 8-bit tile), not timed for
# 4-bit codes before.
# Usage: v12_small_sweep.sh MOEQ   (env OUT)
set -u
moeq="$1"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
t0=$(date +%s)
tiles="8x128/1x4x1/4/p 8x128/1x8x1/4/p 8x256/1x8x1/6/p 16x64/1x4x1/6/p 16x128/1x8x1/6/p 32x128/1x8x1/4/o3 32x128/1x8x1/4/p"
for s in int4-g128 mxfp4; do for t in $tiles; do echo "--preset tiny --scheme $s --tile $t"; done; done |
  xargs -P 14 -L 1 sh -c "\"$moeq\" compile --arch sm_90a \$0 \"\$@\" | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
for s in int4-g128 mxfp4; do
  timeout 100 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme $s -M 16 64 256 \
    --tile $tiles >>"$out/sweep.txt" 2>&1
  echo "bench $s rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^gemm[12] " "$out/sweep.txt" | awk '{print $1, $3, $4, $5, $8, $9, $12}'
