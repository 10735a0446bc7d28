#!/usr/bin/env bash
# Session 36, call 3: the MX scales word on the mma.sync and direct tiles (prepared codes), which then fold
# without their per-warp vote. Tests (the fold bit for bit on every tile kind, a real layer at small M
# against the reference); GEMMs alone and steps O N N O in one binary at the M the direct tiles serve
# (O: MOEQ_MX_SCALES_AT_MOST_TWO=0).
# Usage: v100_mx_word_small_m.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
timeout 200 "$build/moeq_gpu_tests" --gtest_filter=MoeGemmGpu.MxScalesAtMostTwoFoldWithTheSameValues \
  >"$out/gpu_tests_fold.txt" 2>&1 &
timeout 200 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4 -M 1 16 256 --layout indexed masked \
  --codes prepared >"$out/verify_qwen3.txt" 2>&1 &
wait
echo "tests $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|rel |differ" "$out/gpu_tests_fold.txt" | head -20 | cut -c1-200
grep -cE "^pass" "$out/verify_qwen3.txt"; grep -vE "^pass" "$out/verify_qwen3.txt" | tail -5 | cut -c1-200
for who in O N N O; do
  for preset in gpt-oss-120b qwen3-30b-a3b gpt-oss-20b deepseek-v3; do
    run_as "$who" timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme mxfp4 \
      -M 1 16 64 256 --tuning "$root/tuning/sm_90/${preset}_mxfp4.json" >"$out/o.tmp" 2>&1
    grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{t=$0; sub(/.*tile /,"",t); sub(/,.*/,"",t); print s, $1, $2, $3, $4, $5, t}' >>"$out/gemms.txt"
  done
  echo "gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; s[k]+=$6; n[k]++; v[k]=v[k]" "$1":"$6} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/gemms.txt" | sort
for who in O N N O; do
  run_as "$who" timeout 100 "$build/moeq" bench --trials 5 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b \
    gpt-oss-20b deepseek-v3 --scheme mxfp4 -M 1 16 64 256 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gqd]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  echo "steps $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$1":"$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" | sort
grep -E "^copy" "$out/o.tmp" | head -1
echo "done $(($(date +%s) - t0)) s"
