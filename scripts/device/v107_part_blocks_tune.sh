#!/usr/bin/env bash
# Session 38, call 2: the final kernels (session 37's; call 1's consumer change reverted) through the tests of the
# warp-specialized tiles (the part last N block, the 512-channel tiles' unaligned-scale fallback, persistent tiles),
# then `moeq tune --update` with the 512-channel tiles where the MXFP4 tables run 48-64 rows per expert and were
# not tuned with them: gpt-oss-120b M = 1536-2048, Qwen3-30B-A3B M = 640-768, gpt-oss-20b M = 256-384.
# Usage: v107_part_blocks_tune.sh BUILD "PRESET:M,M:TILE,TILE ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
MOEQ_TEST_TILES="48x256/1x8x1/6/p 80x256/1x8x1/6/p/s 48x512/1x8x1/4/p" timeout 150 "$build/moeq_gpu_tests" \
  --gtest_filter='MoeGemmGpu.WarpSpecializedPartNBlocksMatchTheReference:MoeGemmGpu.WideTiles*:MoeGemmGpu.PersistentTiles*' \
  >"$out/gpu_tests_gemm.txt" 2>&1
echo "tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|differs|rel " "$out/gpu_tests_gemm.txt" | head -20 | cut -c1-220
tune_update_tables "$2"
echo "done $(($(date +%s) - t0)) s"
