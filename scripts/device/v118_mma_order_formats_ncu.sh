#!/usr/bin/env bash
# Session 39, call 7: the `/t` tiles on every weight format (MoeGemmGpu.MmaOrderTokensEqualTheirPermutedTile now
# also NVFP4, MXFP8, INT8 per channel, FP8 per channel, INT4 with zero points on the planner's 48- and 144-row `/t`
# tiles; their kernels compiled here on every core first), then the kernels of gpt-oss-120b's MXFP4 step at M = 2048
# one by one (ncu, each kernel's duration: where the step spends beyond its GEMMs).
# Usage: v118_mma_order_formats_ncu.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
warm_tiles "nvfp4 mxfp8 int8-ch fp8-channel int4-g32-zp" "48x256/1x8x1/6/p/t 144x256/1x8x1/4/p/t 48x256/1x8x1/6/p 144x256/1x8x1/4/p"
tail -6 "$out/warm.txt"
timeout 300 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.MmaOrderTokens*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|differs|rel " "$out/gpu_tests.txt" | head -20
grep -c "^mma order" "$out/gpu_tests.txt"
for m in 1024 2048; do
  f="$out/ncu-gpt-oss-$m.txt"
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run --preset gpt-oss-120b \
    --scheme mxfp4 -M "$m" >"$f" 2>&1
  echo "ncu $m rc=$? $(($(date +%s) - t0)) s"
  awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $(NF-1), $NF}' "$f" | tail -12
done
echo "done $(($(date +%s) - t0)) s"
