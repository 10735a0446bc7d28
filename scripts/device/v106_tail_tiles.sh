#!/usr/bin/env bash
# Session 38, call 1: the warp-specialized consumers skip their 64-channel tiles past N (N), against the same kernels
# decoding and multiplying them (O: MOEQ_DIAG_WS=64), on the shipped MXFP4 tables: gpt-oss-120b / gpt-oss-20b
# (N = 5760 and 2880 end every 256- and 512-channel tiling on a part block) and Qwen3-30B-A3B at M = 4096 (N = 1536 /
# 2048: no part block; the control). GEMMs O N N O, steps O N N O, then the tests of the warp-specialized tiles.
# NOTE: ran on a working tree that was not committed (the change is reverted; docs/perf-notes.md, session 38): its
# MOEQ_DIAG_WS=64 existed only there, and the committed moeq refuses it.
# Usage: v106_tail_tiles.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
gemms() {  # WHO PRESET "M ..."
  # shellcheck disable=SC2086
  MOEQ_DIAG_WS=$([ "$1" = O ] && echo 64 || echo 0) timeout 90 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 \
    --preset "$2" --scheme mxfp4 -M $3 --tuning "$root/tuning/sm_90/${2}_mxfp4.json" >"$out/o.tmp" 2>&1
  grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$1" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
  grep -iE "copy|error" "$out/o.tmp" | head -2
}
for who in O N N O; do
  gemms "$who" gpt-oss-120b "1024 2048 4096"
  gemms "$who" gpt-oss-20b "256 1024 4096"
  gemms "$who" qwen3-30b-a3b "4096"
  echo "gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; print k, $1, $6}' "$out/gemms.txt" | sort -k1,4 -k5 | awk '{k=$1" "$2" "$3" "$4; if (k!=p) {printf "\n%s:", k; p=k} printf " %s=%s", $5, $6}'
echo
for who in O N N O; do
  [ $(($(date +%s) - t0)) -gt 330 ] && { echo "skipped steps $who: no time left"; continue; }
  MOEQ_DIAG_WS=$([ "$who" = O ] && echo 64 || echo 0) timeout 80 "$build/moeq" bench --trials 5 --kernel layer \
    --preset gpt-oss-120b gpt-oss-20b --scheme mxfp4 -M 1024 2048 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  echo "steps $who $(($(date +%s) - t0)) s"
done
[ -f "$out/steps.txt" ] && sort -k2,2 -k4,4n -k1,1 "$out/steps.txt"
tiles="48x256/1x8x1/6/p 80x256/1x8x1/6/p/s 48x512/1x8x1/4/p 144x256/1x8x1/4/p 128x256/1x8x1/4/p 64x256/1x8x1/8/p/s"
MOEQ_TEST_TILES="$tiles" timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests_gemm.txt" 2>&1 &
timeout 200 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.PersistentTilesMatchOracle' >"$out/gpu_tests_experts.txt" 2>&1 &
wait
echo "tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|differs|rel " | head -30 | cut -c1-220
echo "done $(($(date +%s) - t0)) s"
