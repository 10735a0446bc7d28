#!/usr/bin/env bash
# Session 14, call B: the direct tiles with tokens and scales loaded at the start of their tile
# (L1 prefetch one tile ahead) and the block rows read by every lane in one round trip (BUILD),
# against the tree before (BASE_BUILD), same process order, two rounds. Every GPU test on BUILD
# first (MoeGemmGpu on the direct tiles).
# Usage: v15_lean.sh BUILD BASE_BUILD   (env OUT; TILES, BASE_TILES, M, PRESETS)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_build="$2"
tiles="${TILES:-8x128/1x4x1/2/r 8x128/1x4x1/2/o6/r 8x128/1x4x1/4/r 8x64/1x2x2/2/r}"
base_tiles="${BASE_TILES:-8x128/1x4x1/2/r 8x64/1x2x2/2/r}"
ms="${M:-1 8 16 64}"
presets="${PRESETS:-qwen3-30b-a3b}"
warm_tiles "int4-g128 mxfp4 fp8-block" "$tiles"
build_saved="$build"; build="$base_build"; warm_tiles "int4-g128 mxfp4 fp8-block" "$base_tiles"; build="$build_saved"
MOEQ_TEST_TILES="8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x128/1x4x1/4/r 16x128/1x4x1/2/r" timeout 240 "$build/moeq_gpu_tests" \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/gpu_tests.txt" | head
for round in 1 2; do
  for p in $presets; do
    for s in int4-g128 mxfp4 fp8-block; do
      # shellcheck disable=SC2086
      timeout 100 "$base_build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $ms \
        --tile $base_tiles >>"$out/base$round.txt" 2>&1
      # shellcheck disable=SC2086
      timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $ms \
        --tile $tiles >>"$out/new$round.txt" 2>&1
      echo "bench $round $p $s rc=$? $(($(date +%s) - t0)) s"
    done
  done
done
