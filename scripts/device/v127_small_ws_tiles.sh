#!/usr/bin/env bash
# Session 40, call 2. (1) gpt-oss-120b MXFP4 at M = 1024 / 2048: GEMM1 costs ~843 us inside the step at M = 2048
# (session 39 call 4's marginal) against ~711 alone (bench and ncu): is it the SM clock? nvidia-smi sampled every 20 ms
# while the bench times GEMM1 / GEMM2 alone, then the step (the shipped table's tiles). (2) 16 rows per expert (Qwen3
# M = 256, gpt-oss-120b M = 512): the warp-specialized wgmma body at 16-32 tokens (new `/p/t` tiles) against the
# direct 24-row tiles the planner runs there and the 48-row `/t` tiles; then whole steps, O (shipped) N (a 24-row `/t`
# entry, $MOEQ_CACHE_DIR/tables127) N O. (3) GPU tests: the candidate test on the new small tiles and on 5 of session
# 39's 14 `/t` candidates never run on a GPU (all 12 of its schemes), the experts and folded-quantizer tests, the
# warm-up test. Their kernels compile in the background from the start (nice), the timings' are packed.
# Usage: v127_small_ws_tiles.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
small="16x512/1x8x1/8/p/t 24x512/1x8x1/6/p/t 24x512/1x8x1/8/p/t 24x512/1x8x1/6/p/s/t 32x512/1x8x1/8/p/t"
old="48x256/1x8x1/6/p/s/t 80x256/1x8x1/8/p/t 144x256/1x8x1/6/p/t 48x512/1x8x1/6/p/t 128x256/1x8x1/6/p/t"
test_tiles="$small 24x256/1x8x1/8/p/t $old"
{
  for s in mxfp4 mxfp8 mxfp4:f16; do for t in $small 48x512/1x8x1/6/p/t; do echo "--preset tiny --scheme $s --tile $t"; done; done
  for s in int4-g128 fp8-block nvfp4 int8-ch int4-g32-zp fp8-channel int4-g64-zp int4-ch int4-g128:f16 mxfp4 mxfp8 mxfp4:f16; do
    for t in 24x256/1x8x1/8/p/t 48x256/1x8x1/6/p/s/t 80x256/1x8x1/8/p/t 144x256/1x8x1/6/p/t 128x256/1x8x1/6/p/t; do
      echo "--preset tiny --scheme $s --tile $t"; done; done
  for s in int4-g128 mxfp4 nvfp4 mxfp8 fp8-channel fp8-block int8-ch int8-g64 int4-g32-zp int4-g64-zp mxfp4:f16 int4-g128:f16; do
    for a in silu swiglu-oai relu2-no-mul gelu gelu-no-mul; do echo "--preset tiny --scheme $s --activation $a"; done; done
} | nice -n 19 xargs -P 12 -L 1 sh -c "\"$build/moeq\" compile --arch sm_90a \$0 \"\$@\" | tail -1" >"$out/warm.txt" 2>&1 &
warm=$!

nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 >"$out/smi.csv" 2>&1 &
smi=$!
table="$root/tuning/sm_90/gpt-oss-120b_mxfp4.json"
for m in 2048 1024; do
  echo "phase gemms M=$m start $(date +%Y/%m/%d\ %H:%M:%S.%N)" >>"$out/phases.txt"
  timeout 60 "$build/moeq" bench --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M $m --tuning "$table" \
    --trials 15 >>"$out/bench.txt" 2>&1
  echo "phase step M=$m start $(date +%Y/%m/%d\ %H:%M:%S.%N)" >>"$out/phases.txt"
  timeout 60 "$build/moeq" bench --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M $m --trials 15 >>"$out/bench.txt" 2>&1
  echo "phase end M=$m $(date +%Y/%m/%d\ %H:%M:%S.%N)" >>"$out/phases.txt"
  sleep 1
done
kill $smi
grep -E "^(gemm|layer) " "$out/bench.txt"
echo "clocks done $(($(date +%s) - t0)) s"

mx="24x512/1x8x1/8/p/t 24x512/1x8x1/6/p/t 24x512/1x8x1/6/p/s/t 32x512/1x8x1/8/p/t 16x512/1x8x1/8/p/t 48x256/1x8x1/8/p/t 48x512/1x8x1/6/p/t"
for case in "qwen3-30b-a3b mxfp4 256" "gpt-oss-120b mxfp4 512" "qwen3-30b-a3b int4-g128 256"; do
  set -- $case
  timeout 60 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --trials 9 >>"$out/small.txt" 2>&1
  tiles=$mx
  [ $2 = int4-g128 ] && tiles="24x256/1x8x1/8/p/t 48x256/1x8x1/8/p/t 48x256/1x8x1/6/p/s/t"
  timeout 120 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --tile $tiles --trials 9 >>"$out/small.txt" 2>&1
  echo "small $case rc=$? $(($(date +%s) - t0)) s"
done
# 8 and 24 rows per expert: the planner's 16- and 32-row tiles against the new 16- and 32-row `/p/t` ones.
for case in "qwen3-30b-a3b mxfp4 128 16x512/1x8x1/8/p/t" "gpt-oss-120b mxfp4 256 16x512/1x8x1/8/p/t" \
            "qwen3-30b-a3b mxfp4 384 32x512/1x8x1/8/p/t"; do
  set -- $case
  timeout 60 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --trials 9 >>"$out/small.txt" 2>&1
  timeout 60 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --tile $4 --trials 9 >>"$out/small.txt" 2>&1
  echo "small $case rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^gemm" "$out/small.txt"
export STEPS_DEADLINE=330
tables="$MOEQ_CACHE_DIR/tables127"
steps_old_new qwen3-30b-a3b mxfp4 "256 224" "$tables/qwen3-30b-a3b_mxfp4.json" steps.txt
steps_old_new gpt-oss-120b mxfp4 "512 448" "$tables/gpt-oss-120b_mxfp4.json" steps.txt
steps_old_new qwen3-30b-a3b int4-g128 "256" "$tables/qwen3-30b-a3b_int4-g128.json" steps.txt
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"

wait $warm
echo "warm rc=$? $(($(date +%s) - t0)) s"
left=$((575 - ($(date +%s) - t0)))
MOEQ_TEST_TILES="$test_tiles" timeout $left "$build/moeq_gpu_tests" \
  --gtest_filter='MoeGemmGpu.EveryTile*:ExpertsGpu.*:FoldedQuantizerGpu.*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -30
grep -E "^\[       OK" "$out/gpu_tests.txt" | sed 's/^/  /'
