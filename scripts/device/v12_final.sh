#!/usr/bin/env bash
# Session 11, call D: after the upload race fix (DeviceBuffer transfers synchronize), main (A) against
# bulk copies of the prepared codes for every format (B) and for 8-bit codes only (C), each case in
# a fresh `moeq bench` process, two rounds, nvidia-smi dmon logged; cuBLAS bf16 of the shapes; then
# every GPU test (MoeGemmGpu on the `/p` tiles) and `moeq verify` for B, MoeGemmGpu on the `/p` wgmma tiles and verify for C.
# Usage: v12_final.sh A_MOEQ B_BUILD C_BUILD   (B_BUILD, C_BUILD hold moeq and moeq_gpu_tests; env OUT)
set -u
a="$1"
b="$2"
c="$3"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
t0=$(date +%s)
tiles="128x256/1x8x1/4/p 64x256/1x8x1/8/p 128x256/1x8x1/5/p"
{
  for bin in "$a" "$b/moeq" "$c/moeq"; do
    for scheme in int4-g128 mxfp4 fp8-block; do echo "$bin --preset qwen3-30b-a3b --scheme $scheme"; done
    echo "$bin --preset gpt-oss-120b --scheme mxfp4"
  done
  for bin in "$b/moeq" "$c/moeq"; do
    for scheme in int4-g128 mxfp4 fp8-block nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch \
                  int4-g128:f16; do
      echo "$bin --preset tiny --scheme $scheme --tile $tiles"
    done
  done
} | xargs -P 16 -L 1 sh -c "\$0 compile --arch sm_90a \"\$@\" | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
"$(dirname "$0")/warm_parallel.sh" "$b/moeq" 16 >"$out/warm_b.txt" 2>&1 &
warm_b=$!
nvidia-smi dmon -s pc -d 1 >"$out/dmon.txt" 2>&1 &
dmon=$!
run() {  # run NAME BIN ARGS...
  local name="$1" bin="$2"
  shift 2
  echo "== $name $(date +%s)" >>"$out/bench.txt"
  timeout 120 "$bin" bench --trials 5 "$@" >>"$out/bench.txt" 2>&1
}
for round in 1 2; do
  m="1024 4096"
  [ $round = 1 ] && m="16 64 1024 4096"
  for who in A B C; do
    bin="$a"; [ $who = B ] && bin="$b/moeq"; [ $who = C ] && bin="$c/moeq"
    run "$who round $round" "$bin" --preset qwen3-30b-a3b --kernel gemm1 gemm2 --scheme int4-g128 mxfp4 fp8-block -M $m
  done
done
for who in A B C; do
  bin="$a"; [ $who = B ] && bin="$b/moeq"; [ $who = C ] && bin="$c/moeq"
  run "$who gpt-oss" "$bin" --preset gpt-oss-120b --kernel gemm1 --scheme mxfp4 -M 1024 4096
done
kill $dmon
echo "bench $(($(date +%s) - t0)) s"
for p in qwen3-30b-a3b gpt-oss-120b; do
  timeout 90 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset $p >"$out/cublas_$p.txt" 2>&1
done
echo "cublas $(($(date +%s) - t0)) s"
grep -E "^==|^gemm[12] " "$out/bench.txt" | cut -c1-122
grep -E "1024|4096" "$out"/cublas_*.txt
wait $warm_b
echo "warm b rc=$? $(($(date +%s) - t0)) s"
MOEQ_TEST_TILES="$tiles 8x128/1x4x1/4/p 8x128/1x8x1/4/p 16x64/1x4x1/6/p" timeout 200 "$b/moeq_gpu_tests" \
  >"$out/gpu_tests_b.txt" 2>&1
echo "gpu tests B rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/gpu_tests_b.txt" | head
timeout 60 "$b/moeq" verify >"$out/verify_b.txt" 2>&1
echo "verify B rc=$? $(tail -1 "$out/verify_b.txt")"
MOEQ_TEST_TILES="$tiles" timeout 100 "$c/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests_c.txt" 2>&1
echo "gpu tests C rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/gpu_tests_c.txt" | head
timeout 60 "$c/moeq" verify >"$out/verify_c.txt" 2>&1
echo "verify C rc=$? $(tail -1 "$out/verify_c.txt")"
echo "end $(($(date +%s) - t0)) s"
