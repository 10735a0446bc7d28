#!/usr/bin/env bash
# Session 40, call 1: what session 39 left unrun on a GPU. Every GPU test, with MoeGemmGpu's candidate tests on the
# 14 `/t` tuning candidates (EveryTileCandidateMatchesTheDequantizedProduct on all 12 of its schemes), the quantized
# activation pairs after the quantizers' MMA-order sink, and the warm-up test, on the review commit 424abc5's code.
# Usage: v125_validate_mma_order.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tiles="48x256/1x8x1/8/p/t 48x256/1x8x1/6/p/s/t 64x256/1x8x1/8/p/t 80x256/1x8x1/6/p/t 80x256/1x8x1/8/p/t
80x256/1x8x1/6/p/s/t 96x256/1x8x1/6/p/t 128x256/1x8x1/4/p/t 128x256/1x8x1/6/p/t 144x256/1x8x1/4/p/t 144x256/1x8x1/6/p/t
144x256/1x8x1/3/p/s/t 48x512/1x8x1/4/p/t 48x512/1x8x1/6/p/t"
tiles=$(echo $tiles)
schemes="int4-g128 mxfp4 fp8-block nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch int4-g128:f16"
warm_tiles "$schemes" "$tiles"
for scheme in $schemes int8-g64; do
  for activation in silu swiglu-oai relu2-no-mul gelu gelu-no-mul; do
    echo "--preset tiny --scheme $scheme --activation $activation"
  done
done | xargs -P 16 -L 1 sh -c "\"$build/moeq\" compile --arch sm_90a \$0 \"\$@\" | tail -1" >>"$out/warm.txt" 2>&1
echo "warm planner rc=$? $(($(date +%s) - t0)) s"
MOEQ_TEST_TILES="$tiles" timeout 380 "$build/moeq_gpu_tests" >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$out/gpu_tests.txt" | head -30
timeout 100 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) " "$out/warmup.txt"
