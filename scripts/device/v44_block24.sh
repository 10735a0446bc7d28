#!/usr/bin/env bash
# 24- and 32-row direct tiles (session 25): correctness on the new tiles, then GEMM1 / GEMM2 at the M
# where Qwen3 routes ~16 rows per expert (M = 256; also 128 and 512) and gpt-oss-120b ~8 (M = 256),
# against the tiles the planner and the shipped tables run there today.
# Usage: v44_block24.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >"$out/gpu.txt" 2>&1
new="24x128/1x4x1/2/r 24x64/1x4x1/2/r 24x128/1x8x1/2/r 32x64/1x4x1/2/r 32x128/1x4x1/2/r 16x64/1x4x1/2/r"
gpu_tests "$new" 'MoeGemmGpu.*:ExpertsGpu.DirectTiles*' 240
t256="16x128/1x4x1/4 32x128/1x8x1/4/o3 16x128/1x4x1/2/r 16x64/1x4x1/2/r 24x128/1x4x1/2/r 24x64/1x4x1/2/r 24x128/1x8x1/2/r 32x64/1x4x1/2/r 32x128/1x4x1/2/r 24x128/1x4x1/4/r"
for s in mxfp4 int4-g128; do
  # shellcheck disable=SC2086
  timeout 120 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme $s -M 256 --tile $t256 >>"$out/sweep.txt" 2>&1
  echo "qwen3 $s rc=$? $(($(date +%s) - t0)) s"
done
# shellcheck disable=SC2086
timeout 150 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M 256 --tile $t256 >>"$out/sweep.txt" 2>&1
echo "gpt-oss rc=$? $(($(date +%s) - t0)) s"
timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 -M 512 \
  --tile 64x256/1x8x1/8/p 32x64/1x4x1/2/r 32x128/1x4x1/2/r 24x128/1x4x1/2/r >>"$out/sweep.txt" 2>&1
timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 -M 128 \
  --tile 8x128/1x4x1/4/o4/r 16x128/1x4x1/2/r 16x64/1x4x1/2/r 24x128/1x4x1/2/r >>"$out/sweep.txt" 2>&1
echo "rest rc=$? $(($(date +%s) - t0)) s"
