#!/usr/bin/env bash
# Session 37, call 4: 512-channel warp-specialized tiles with the MX scales staged by the copy warps.
# Tests first (the wide tiles against the 256-channel ones bit for bit and against the reference; the
# fold test on the unchanged tiles), then GEMM1 / GEMM2 of gpt-oss-120b and Qwen3-30B-A3B MXFP4 on each
# tile, rounds A B A B, beside the shipped table's tiles.
# Usage: v103_wide_tiles.sh BUILD "PRESET:M,M ..." "TILE ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.WideTiles*:MoeGemmGpu.MxScalesAtMostTwo*' \
  >"$out/gpu_tests_wide.txt" 2>&1 &
MOEQ_TEST_TILES="48x512/1x8x1/6/p/s 48x512/1x8x1/4/p/s 64x512/1x8x1/4/p/s" timeout 200 "$build/moeq_gpu_tests" \
  --gtest_filter='MoeGemmGpu.EveryTileCandidate*' >"$out/gpu_tests_candidates.txt" 2>&1 &
wait
echo "tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|differs|rel " | head -30 | cut -c1-220
for round in 1 2; do
  for tile in table $3; do
    [ $(($(date +%s) - t0)) -gt 530 ] && { echo "skipped $tile: no time left"; continue; }
    for item in $2; do
      preset="${item%%:*}" ms="$(echo "${item#*:}" | tr ',' ' ')"
      if [ "$tile" = table ]; then sel=(--tuning "$root/tuning/sm_90/${preset}_mxfp4.json"); else sel=(--tile "$tile"); fi
      # shellcheck disable=SC2086
      timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme mxfp4 -M $ms \
        "${sel[@]}" >"$out/o.tmp" 2>&1
      grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$tile" '{print s, $1, $2, $3, $4, $5, $10}' >>"$out/gemms.txt"
    done
    echo "round $round $tile $(($(date +%s) - t0)) s"
  done
done
head -4 "$out/o.tmp"
sort -k2,2 -k3,3 -k5,5n -k1,1 "$out/gemms.txt" | awk '{k=$2" "$3" "$5; if (k!=p) {printf "\n%s:", k; p=k} printf " %s=%s", $1, $6}'
echo
echo "done $(($(date +%s) - t0)) s"
