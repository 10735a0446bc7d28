#!/usr/bin/env bash
# Written at the end of session 52 (no H200 came that session) for the next call on an H200: what session 52 shipped on
# H100 evidence alone, and its open leads.
#  1. Qwen3-30B-A3B INT4-g128 rows (1280, 2048] on 24x256/1x8x1/4/o2/p/t (shipped): whole steps O N N O at M = 192 / 256
#     (O: the table before session 52 through --tuning), and GEMM1 / GEMM2 at M = 256 on both tiles (the bar's M = 256).
#     Prediction: larger than the H100's -2.7% / -3.5%, since the old tile ran at 56% / 45% of copy on the H200.
#  2. GEMM1's activation epilogue with the occupancy rule, N A A N: Mixtral-8x7B M = 1-8, Qwen3 and gpt-oss-120b M = 1-2;
#     then Mixtral's (0, 2] GEMM1 on 8x256/1x8x1/4/o2/r (the epilogue kernel fits 128 registers there: it fuses), T A A T.
#  3. ncu DRAM and L2 counters of Mixtral's GEMM1 at M = 2 / 4, epilogue on and off (it is 4-5% slower at the same CTAs an
#     SM on the H100).
#  4. gpt-oss-120b rows (2048, 2560] on the (2560, 3072] row's tiles (GEMM2 32x512/1x8x1/8/p/t: -2.2% GEMM2 at M = 640 on
#     the H100), whole steps O G G O at M = 576 / 640.
#  5. Qwen3-30B-A3B MXFP4 GEMM2 at M = 4096 (1.116x Humming's on the H100, K = 768) on nine warp-specialized tiles.
# Usage: s53_h200_owed.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tables="$root/scripts/device/tables"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for who in O N N O; do
  table=shipped
  [ "$who" = O ] && table="$tables/s53_qwen3_int4_before_s52.json"
  layer_steps "$table" qwen3-30b-a3b int4-g128 "192 256" N
done
timeout 90 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 -M 256 \
  --tile 24x128/1x4x1/4/r 24x256/1x8x1/4/o2/p/t >"$out/int4_256.txt" 2>&1
echo "int4 256 rc=$? $(($(date +%s) - t0)) s"
layer_steps shipped mixtral-8x7b mxfp4 "1 2 4 8" "N A A N"
layer_steps shipped qwen3-30b-a3b mxfp4 "1 2" "N A A N"
layer_steps shipped gpt-oss-120b mxfp4 "1 2" "N A A N"
layer_steps "$tables/s53_mixtral_o2.json" mixtral-8x7b mxfp4 "1" "N A A N"
for m in 2 4; do
  for who in N A; do
    act=1
    [ "$who" = A ] && act=0
    MOEQ_FUSED_ACTIVATION=$act timeout 90 ncu --clock-control none -k regex:moeq_moe_gemm --launch-count 4 --metrics \
      gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_read.sum,lts__t_sector_hit_rate.pct \
      "$build/moeq" run --preset mixtral-8x7b --scheme mxfp4 -M "$m" >"$out/ncu-mixtral-$m-$who.txt" 2>&1
    echo "ncu M=$m $who rc=$? $(($(date +%s) - t0)) s"
  done
done
for who in O G G O; do
  table=shipped
  [ "$who" = G ] && table="$tables/s53_gpt_oss_gemm2_32x512.json"
  layer_steps "$table" gpt-oss-120b mxfp4 "576 640" N
done
# shellcheck disable=SC2086
timeout 90 "$build/moeq" bench --trials 7 --kernel gemm2 --preset qwen3-30b-a3b --scheme mxfp4 -M 4096 --tile \
  144x256/1x8x1/4/p/t 128x256/1x8x1/4/p/t 96x256/1x8x1/4/p/s/t 96x256/1x8x1/4/p/t 80x256/1x8x1/6/p/s/t \
  64x256/1x8x1/8/p/t 144x256/1x8x1/3/p/s/t 128x256/1x8x1/6/p/t 96x256/1x8x1/6/p/t >"$out/mxfp4_4096_gemm2.txt" 2>&1
echo "mxfp4 4096 gemm2 rc=$? $(($(date +%s) - t0)) s"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
