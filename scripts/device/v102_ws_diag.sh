#!/usr/bin/env bash
# Session 37, call 2: what each part of the warp-specialized tile costs where moeq loses to Humming
# (gpt-oss-120b MXFP4 at M = 1024 / 2048, Qwen3-30B-A3B at M = 4096): the shipped tables' GEMMs with
# MOEQ_DIAG_WS bits (timing only: 1 no token permute, 2 no dequantization, 4 no scale loads, 8 no
# wgmma), each against the full kernel (0) in the same call, rounds 0 V... 0.
# Usage: v102_ws_diag.sh BUILD "V ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
timeout 100 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.MxScalesAtMostTwo*' >"$out/gpu_tests_fold.txt" 2>&1
echo "fold test rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure" "$out/gpu_tests_fold.txt" | head -10 | cut -c1-200
for round in 1 2; do
  for v in 0 $2; do
    [ $(($(date +%s) - t0)) -gt 520 ] && { echo "skipped $v: no time left"; continue; }
    for spec in "gpt-oss-120b 1024 2048" "qwen3-30b-a3b 4096"; do
      read -r preset ms <<<"$spec"
      # shellcheck disable=SC2086
      MOEQ_DIAG_WS=$v timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" \
        --scheme mxfp4 -M $ms --tuning "$root/tuning/sm_90/${preset}_mxfp4.json" >"$out/o.tmp" 2>&1
      grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$v" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
    done
    echo "round $round skip $v $(($(date +%s) - t0)) s"
  done
done
head -5 "$out/o.tmp"
awk '{k=$2" "$3" "$4" "$5; print k, $1, $6}' "$out/gemms.txt" | sort -k1,4 -k5n | awk '{k=$1" "$2" "$3" "$4; if (k!=p) {printf "\n%s:", k; p=k} printf " %s=%s", $5, $6}'
echo
echo "done $(($(date +%s) - t0)) s"
