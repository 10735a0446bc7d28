#!/usr/bin/env bash
# Session 52, after call 1 (H100): Mixtral-8x7B MXFP4 steps lost 2.1-6.3 us at M = 1-4 with GEMM1's activation epilogue
# (the landed rule) against MOEQ_FUSED_ACTIVATION=0. ptxas here: its M = 1 tile (8x256/1x8x1/4/r) has 128 registers
# plain, 145 with the epilogue (prepared codes, at most two MX scales): one CTA an SM instead of two.
#  1. ncu kernel durations of `moeq run` (Mixtral MXFP4, M = 1 / 2 / 4), epilogue on (N) and off (A): which kernel
#     takes the loss.
#     Then whole steps N A A N of Mixtral M = 1-8, Qwen3-30B-A3B MXFP4 and gpt-oss-120b M = 1 / 2 with BUILD, whose apply
#     skips the epilogue where its registers cost a CTA an SM (activation_epilogue_keeps_occupancy).
#     GPU tests (the epilogue's bit equality, odd shapes and graph capture through apply) and `moeq verify` of those
#     layers at M = 1-4 with BUILD.
#  2. Issue 6's GEMM2 losses at gpt-oss-120b M = 256 / 640 / 1024 (1.01x / 1.13x / 1.06x Humming's in call 2): GEMM2 on
#     the tiles its shipped table holds, to tell whether a table row or the kernel is short.
#  3. On an H200 only: Qwen3-30B-A3B INT4-g128 whole steps O C C O at M = 192 / 256 (C: a (1280, 2048] row on
#     24x256/1x8x1/4/o2/p/t, -3.5% / -2.7% on the H100 in call 1).
# Usage: s52_epilogue_losses.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for m in 1 2 4; do
  for who in N A; do
    act=1
    [ "$who" = A ] && act=0
    f="$out/ncu-mixtral-$m-$who.txt"
    MOEQ_FUSED_ACTIVATION=$act timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers \
      "$build/moeq" run --preset mixtral-8x7b --scheme mxfp4 -M "$m" >"$f" 2>&1
    echo "ncu M=$m $who rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
      paste -sd' ')"
  done
done
filtered_gpu_tests 'MoeGemmGpu.ActivationEpilogue*:ExpertsGpu.OddShapes*:ExpertsGpu.GraphCapture*' 150
layer_verify "mixtral-8x7b mxfp4 1 2 4" "qwen3-30b-a3b mxfp4 1 2" "gpt-oss-120b mxfp4 1 2"
layer_steps shipped mixtral-8x7b mxfp4 "1 2 4 8" "N A A N"
layer_steps shipped qwen3-30b-a3b mxfp4 "1 2" "N A A N"
layer_steps shipped gpt-oss-120b mxfp4 "1 2" "N A A N"
# shellcheck disable=SC2086
timeout 150 "$build/moeq" bench --trials 7 --kernel gemm2 --preset gpt-oss-120b --scheme mxfp4 -M 256 640 1024 \
  --tile 8x64/1x4x1/2/r 16x128/1x4x1/2/r 24x256/1x8x1/4/o2/p/t 32x128/1x8x1/8/o2/p/t 32x512/1x8x1/8/p/t \
  48x512/1x8x1/6/p/t >"$out/oss_gemm2_tiles.txt" 2>&1
echo "gpt-oss gemm2 tiles rc=$? $(($(date +%s) - t0)) s"
case "$gpu" in
  *H200*)
    for who in O C C O; do
      table=shipped
      [ "$who" = C ] && table="$root/scripts/device/tables/s52_qwen3_int4_o2.json"
      layer_steps "$table" qwen3-30b-a3b int4-g128 "192 256" N
    done
    ;;
esac
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
