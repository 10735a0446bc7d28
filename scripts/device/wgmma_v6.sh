#!/usr/bin/env bash
# GEMM v6 wgmma check in one device call: warm the kernels (in parallel), run MoeGemmGpu on the
# wgmma candidates only, then time the /w tiles against the planner's mma.sync tiles at
# M = 1024 and 4096 (Qwen3-30B-A3B GEMM1) for this build and, optionally, a variant
# build (VARIANT: a second `moeq` binary with other device headers), plus cuBLAS bf16.
# Usage: wgmma_v6.sh BUILD_DIR [VARIANT_MOEQ]   (env MOEQ_CACHE_DIR, OUT, TOKENS)
set -u
build="$1"
variant="${2:-}"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
wtiles="64x64/1x4x1/4/w 64x128/1x4x1/4/w 64x128/1x4x1/6/w 64x256/1x4x1/4/w 64x128/1x4x1/4/o2/w"
read -r -a tokens <<<"${TOKENS:-1024 4096}"
{
  for s in int4-g128 mxfp4 fp8-block nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch \
           int4-g128:f16; do
    echo "$build/moeq $s"
  done
  if [ -n "$variant" ]; then for s in int4-g128 mxfp4 fp8-block; do echo "$variant $s"; done; fi
} | xargs -P 16 -L 1 sh -c "\$0 compile --arch sm_90a --preset tiny --scheme \$1 --tile $wtiles | tail -1" | sort | uniq -c
MOEQ_TEST_TILES="$wtiles" timeout 300 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_wgmma.txt" 2>&1
echo "MoeGemmGpu (wgmma tiles) rc=$?"
tail -3 "$out/gpu_wgmma.txt"
grep -m 20 "Failure\|rel " "$out/gpu_wgmma.txt"
for who in new variant; do
  bin="$build/moeq"
  if [ "$who" = variant ]; then
    [ -z "$variant" ] && continue
    bin="$variant"
  fi
  tiles="64x128/1x4x1/4 64x128/1x4x1/4/o3 $wtiles"
  [ "$who" = variant ] && tiles="64x128/1x4x1/4/w 64x128/1x4x1/4/o2/w 64x256/1x4x1/4/w"
  echo "== $who" >>"$out/bench_w.txt"
  timeout 240 "$bin" bench --trials 5 --kernel gemm1 --preset qwen3-30b-a3b --tokens "${tokens[@]}" \
    --scheme int4-g128 mxfp4 fp8-block --tile $tiles >>"$out/bench_w.txt" 2>&1
  echo "bench $who rc=$?"
done
timeout 120 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b >"$out/cublas.txt" 2>&1
echo "cublas rc=$?"
