#!/usr/bin/env bash
# GEMM v7 check in one device call: compile the warp-specialized (/p) tiles on the device (in
# parallel), run MoeGemmGpu on them only, then time them against the planner's 64-row tiles
# (Qwen3-30B-A3B GEMM1; INT4-g128, MXFP4, FP8-block) plus cuBLAS bf16 of the same shapes.
# Usage: ws_v7.sh MOEQ TESTS   (env MOEQ_CACHE_DIR, OUT, TOKENS, TILES)
set -u
moeq="$1"
tests="$2"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
wtiles="${TILES:-128x256/1x8x1/4/p 128x256/1x8x1/3/p 128x128/1x8x1/4/p 64x256/1x8x1/4/p 64x256/1x8x1/6/p 128x128/2x4x1/4}"
read -r -a tokens <<<"${TOKENS:-256 1024 4096}"
for s in int4-g128 mxfp4 fp8-block nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch \
         int4-g128:f16; do
  echo "$s"
done | xargs -P 16 -L 1 sh -c "$moeq compile --arch sm_90a --preset tiny --scheme \$0 --tile $wtiles 64x128/1x4x1/4/o3 64x128/1x4x1/4 | tail -1" |
  sort | uniq -c
MOEQ_TEST_TILES="$wtiles" timeout 240 "$tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_ws.txt" 2>&1
echo "MoeGemmGpu (/p tiles) rc=$?"
tail -3 "$out/gpu_ws.txt"
grep -m 20 "Failure\|rel " "$out/gpu_ws.txt"
timeout 300 "$moeq" bench --trials 5 --kernel gemm1 --preset qwen3-30b-a3b --tokens "${tokens[@]}" \
  --scheme int4-g128 mxfp4 fp8-block --tile 64x128/1x4x1/4/o3 64x128/1x4x1/4 $wtiles >"$out/bench_ws.txt" 2>&1
echo "bench rc=$?"
timeout 120 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b >"$out/cublas.txt" 2>&1
echo "cublas rc=$?"
