#!/usr/bin/env bash
# Session 39, call 1: warp-specialized tiles reading tokens in the MMA's K order (`/t`: no permute warps, wgmma on
# the 128-byte-swizzled staging) against their permuting twins. Tests first (bit-identical to the twin, and the
# reference), then GEMM1 / GEMM2 timings of the shipped tables' large-M tiles and /t variants with deeper rings,
# two rounds (tile lists forward, then reversed).
# Usage: v112_mma_order.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
# FP8-block's test kernels (the pack's line for them stopped at a tile too large for 8-bit codes).
warm_tiles "fp8-block" "48x256/1x8x1/6/p/t 144x256/1x8x1/4/p/t 64x256/1x8x1/8/p/t 80x256/1x8x1/6/p/s/t 48x256/1x8x1/6/p 144x256/1x8x1/4/p 64x256/1x8x1/8/p"
timeout 240 "$build/moeq_gpu_tests" \
  --gtest_filter='MoeGemmGpu.MmaOrderTokens*:MoeGemmGpu.WarpSpecializedPartNBlocks*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|differs" "$out/gpu_tests.txt" | head -20
timeout 100 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
tail -3 "$out/warmup.txt"
q3="144x256/1x8x1/4/p 144x256/1x8x1/4/p/t 144x256/1x8x1/6/p/t 144x256/1x8x1/8/p/t 144x256/1x8x1/3/p/s 144x256/1x8x1/3/p/s/t 144x256/1x8x1/5/p/s/t"
oss="48x512/1x8x1/4/p 48x512/1x8x1/4/p/t 48x512/1x8x1/6/p/t 48x256/1x8x1/6/p/s 48x256/1x8x1/6/p/s/t"
oss2="80x256/1x8x1/6/p/s 80x256/1x8x1/6/p/s/t 80x256/1x8x1/8/p/t 80x256/1x8x1/8/p/s/t"
rev() { echo "$1" | tr ' ' '\n' | tac | tr '\n' ' '; }
for round in 1 2; do
  for item in "qwen3-30b-a3b|int4-g128|4096|$q3" "qwen3-30b-a3b|mxfp4|4096|$q3" "gpt-oss-120b|mxfp4|1024|$oss" \
              "gpt-oss-120b|mxfp4|2048|$oss2"; do
    IFS='|' read -r p s m tiles <<<"$item"
    [ "$round" = 2 ] && tiles=$(rev "$tiles")
    # shellcheck disable=SC2086
    timeout 120 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m --tile $tiles \
      >>"$out/bench$round.txt" 2>&1
    echo "bench $round $p $s $m rc=$? $(($(date +%s) - t0)) s"
  done
done
grep -hE "^(gemm|copy)" "$out"/bench1.txt "$out"/bench2.txt | head -90
