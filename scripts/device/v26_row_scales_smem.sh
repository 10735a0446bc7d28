#!/usr/bin/env bash
# The warp-specialized wgmma body fetching each block's FP8 per-token row scales into shared memory
# before its main loop (they were read after it, in the epilogue: +107 / +38 us on Qwen3 MXFP4
# GEMM1 / GEMM2 at M = 4096, bench/results/2026-12-02-h200-e4m3-direct.md).
# One call: warm, ExpertsGpu.RowScalesAfterKGroupsAndSplitK (now with the 128- and 64-row /p
# tiles), then the Qwen3 layer mxfp4:fp8-token at M = 4096 with the new build and BASE (efe5acc),
# new / base / new / base (the session's last device minutes: the smallest call that decides it).
# Usage: v26_row_scales_smem.sh BUILD BASE_MOEQ   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
touch "$out/.start"
# NOTE: no warm step: the kernels this call runs (sm_90a) were compiled on the workstation into
# the carried .cache-device (the device has no time left for it), BUILD holding moeq and
# moeq_gpu_tests alone; a key the device's NVRTC does not match compiles on first use.
timeout 90 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.RowScalesAfterKGroupsAndSplitK' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -20
for moeq in "$build/moeq" "$base_moeq" "$build/moeq" "$base_moeq"; do
  timeout 40 "$moeq" bench --trials 3 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 4096 \
    >>"$out/layer.txt" 2>&1
  echo "layer $moeq rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^layer  qwen" "$out/layer.txt" | awk '{print $3, $4, $5}'
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
