#!/usr/bin/env bash
# Session 12, call D: the direct-load tiles in the planner (8-row blocks: 8x128/1x4x1/2/r, few rows
# 8x64/1x2x2/4/r). Every GPU test (MoeGemmGpu on the /r candidates for every scheme), `moeq verify`
# and the warm-up test (last); the planner's small-M GEMMs on Qwen3-30B-A3B (two rounds) with the
# copy-warp tiles they replace, M = 4 against its tiles, gpt-oss-120b and DeepSeek-V3 (one round).
# Usage: v13_final.sh MOEQ_BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
evidence_setup "$1" "$1"
direct="8x128/1x4x1/2/r 8x128/1x4x1/4/r 8x64/1x2x2/4/r 8x256/1x8x1/4/r 8x64/1x4x1/2/r 16x128/1x4x1/2/r"
old="8x128/1x4x1/4/p 8x128/1x8x1/4/p 8x32/1x1x4/16"
warm_tiles "int4-g128 mxfp4 fp8-block" "$old" "qwen3-30b-a3b gpt-oss-120b deepseek-v3"
MOEQ_TEST_TILES="$direct" timeout 300 "$build/moeq_gpu_tests" >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$out/gpu_tests.txt" | head
timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
echo "verify rc=$? $(tail -1 "$out/verify.txt")"
bench() { timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 "$@" >>"$out/bench.txt" 2>&1; }
for round in 1 2; do
  for s in int4-g128 mxfp4 fp8-block; do
    bench --preset qwen3-30b-a3b --scheme $s -M 1 2 4 16 64
    bench --preset qwen3-30b-a3b --scheme $s -M 16 64 --tile $old
  done
  echo "bench round $round $(($(date +%s) - t0)) s"
done
for s in int4-g128 mxfp4 fp8-block; do bench --preset qwen3-30b-a3b --scheme $s -M 4 --tile 8x128/1x4x1/2/r 8x128/1x4x1/4/p; done
bench --preset gpt-oss-120b --scheme mxfp4 -M 1 16 64
bench --preset gpt-oss-120b --scheme mxfp4 -M 16 64 --tile $old
for s in int4-g128 fp8-block; do
  bench --preset deepseek-v3 --scheme $s -M 1 16 64
  bench --preset deepseek-v3 --scheme $s -M 16 64 --tile $old
done
echo "bench done $(($(date +%s) - t0)) s"
timeout 100 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
