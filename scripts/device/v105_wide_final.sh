#!/usr/bin/env bash
# Session 37, call 6: the final binary's GPU tests of the warp-specialized tiles (512 channels, the fold, persistent
# tiles, every candidate of the touched families), then `moeq tune --update` with the 512-channel candidates
# beside the 48-row ones where the MXFP4 tables run 48-row blocks (gpt-oss-120b M = 1024, Qwen3-30B-A3B M = 512).
# Usage: v105_wide_final.sh BUILD "PRESET:M,M:TILE,TILE ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
MOEQ_TEST_TILES="48x512/1x8x1/4/p/s 48x512/1x8x1/4/p 48x256/1x8x1/6/p/s 64x256/1x8x1/8/p/s 48x256/1x8x1/6/p 128x256/1x8x1/4/p" \
  timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests_gemm.txt" 2>&1
echo "tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|differs|rel " "$out/gpu_tests_gemm.txt" | head -20 | cut -c1-220
tune_update_tables "$2"
echo "done $(($(date +%s) - t0)) s"
# The consumers alone (MOEQ_DIAG_WS=49: no copies, no permute) on the tables' tiles, and the synchronization-only and
# producer-only kernels persistent (48x256/1x8x1/6/p/s) against one tile per CTA (48x256/1x8x1/6/p); timing only.
diag() {  # V PRESET "M ..." [TILE]
  local sel=(--tuning "$root/tuning/sm_90/${2}_mxfp4.json")
  [ -n "${4:-}" ] && sel=(--tile "$4")
  # shellcheck disable=SC2086
  MOEQ_DIAG_WS=$1 timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$2" --scheme mxfp4 -M $3 \
    "${sel[@]}" >"$out/o.tmp" 2>&1
  grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="diag$1 ${4:-table}" '{print s, $1, $2, $4, $5}'
}
for v in 0 49; do diag $v gpt-oss-120b "1024"; diag $v qwen3-30b-a3b "4096"; done
for t in 48x256/1x8x1/6/p/s 48x256/1x8x1/6/p; do for v in 0 63 15; do diag $v gpt-oss-120b "1024" $t; done; done
echo "done $(($(date +%s) - t0)) s"
