#!/usr/bin/env bash
# Session 31, call 4: what call 3's test limit cut: the fold against the quantizer's own launch on every
# routing path (FoldedQuantizerGpu), the routing kernels (their first kernels take the fold argument now),
# then the direct tiles of the GEMM tests (the row scales' fetch moved; MOEQ_TEST_TILES) while time lasts.
# Usage: v73_fold_unit_gpu.sh BUILD   (env OUT; the kernel cache of call 3 and its new cubins unpacked)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
timeout 300 "$build/moeq_gpu_tests" --gtest_filter='FoldedQuantizerGpu.*:RoutingGpu.*:-RoutingGpu.PrintsTimings' \
  >"$out/fold_tests.txt" 2>&1
echo "fold + routing tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|Failure" "$out/fold_tests.txt" | head -20
gpu_tests "24x128/1x4x1/4/r 8x128/1x4x1/4/o4/r" 'MoeGemmGpu.EveryTileCandidate*' $((440 - $(date +%s) + t0))
