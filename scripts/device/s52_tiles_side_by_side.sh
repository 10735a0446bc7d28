#!/usr/bin/env bash
# Session 52, two calls on one warm machine.
# Part `moeq` (BUILD = 3a41854's code):
#  1. GPU tests session 51 changed without running them: the activation epilogue's added cases (canonical codes,
#     NVFP4's two global scales, a 16-byte stride with a part chunk) and the refactored self-routed ones, graph capture,
#     odd shapes; the warm-up test.
#  2. Mixtral-8x7B MXFP4 whole steps at M = 1-8 (2-16 rows), N A A N (N: the landed rule, which applies GEMM1's
#     activation epilogue there; A: MOEQ_FUSED_ACTIVATION=0). Session 51 timed it there only beside the fused reduce.
#  3. Qwen3-30B-A3B INT4-g128 at 10-48 rows per expert (M = 160-384): GEMM1 / GEMM2 on the 24-row warp-specialized
#     tiles and the direct tiles the planner takes there (its table has no row for 1281-2048 rows); whole steps O C W W C O
#     (O: shipped table; C / W: a (1280, 2048] row on 24x256/1x8x1/4/o2/p/t / 24x256/1x8x1/8/p/t); verify of both.
#     And GEMM2 at M = 4096 on nine warp-specialized tiles (1.15x Humming's in session 51).
#  4. Issue 6's kernel level: MXFP4 GEMM1 / GEMM2 of Qwen3-30B-A3B and gpt-oss-120b with the shipped tables at the
#     issue's M; whole steps of gpt-oss-120b at M = 256-1024.
# Part `humming`: Humming's GEMMs on the same MXFP4 layers and M, and on Qwen3 INT4-g128 at M = 160-384; its gpt-oss-120b
# steps at M = 256-1024.
# Prediction (3): the 24-row warp-specialized tiles take GEMM1 / GEMM2 at M = 256 from 56% / 45% of copy to >= 65%
# (the MXFP4 layer's 24x256 two-CTA tile wins there against Humming), the step -5% to -10%.
# Usage: s52_tiles_side_by_side.sh moeq|humming BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tables="$root/scripts/device/tables"
shipped="$root/tuning/sm_90"
qwen_m="1 16 64 256 1024 4096"
oss_m="1 16 64 256 640 1024 4096"
int4_m="160 256 384"
int4_tiles="24x128/1x4x1/4/r 24x128/1x4x1/2/r 16x128/1x4x1/4/r 24x256/1x8x1/4/o2/p/t 24x256/1x8x1/8/p/t \
24x256/1x8x1/4/p/t 24x128/1x8x1/8/p/t 24x128/1x8x1/8/o2/p/t 16x128/1x8x1/8/o2/p/t 32x128/1x8x1/8/o2/p/t"
# GEMM2 at M = 4096 (K = 768), 1.15x Humming's in session 51 on the table's 144x256/1x8x1/4/p/t.
int4_4096_tiles="144x256/1x8x1/4/p/t 128x256/1x8x1/4/p/t 96x256/1x8x1/4/p/s/t 96x256/1x8x1/4/p/t 80x256/1x8x1/6/p/s/t \
64x256/1x8x1/8/p/t 144x256/1x8x1/3/p/s/t 128x256/1x8x1/6/p/t 96x256/1x8x1/6/p/t"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$part" = moeq ]; then
  filtered_gpu_tests 'MoeGemmGpu.ActivationEpilogue*:MoeGemmGpu.SelfRouted*:ExpertsGpu.OddShapes*:ExpertsGpu.BadRoutingValues*:ExpertsGpu.GraphCapture*' 200
  layer_steps shipped mixtral-8x7b mxfp4 "1 2 4 8" "N A A N"
  # shellcheck disable=SC2086
  timeout 150 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 \
    -M $int4_m --tile $int4_tiles >"$out/int4_tiles.txt" 2>&1
  echo "int4 tiles rc=$? $(($(date +%s) - t0)) s"
  # shellcheck disable=SC2086
  timeout 90 "$build/moeq" bench --trials 7 --kernel gemm2 --preset qwen3-30b-a3b --scheme int4-g128 -M 4096 \
    --tile $int4_4096_tiles >"$out/int4_4096_tiles.txt" 2>&1
  echo "int4 4096 tiles rc=$? $(($(date +%s) - t0)) s"
  for who in O C W W C O; do
    table=shipped
    [ "$who" = C ] && table="$tables/s52_qwen3_int4_o2.json"
    [ "$who" = W ] && table="$tables/s52_qwen3_int4_ws8.json"
    layer_steps "$table" qwen3-30b-a3b int4-g128 "160 192 256" N
  done
  timeout 120 "$build/moeq" verify --preset qwen3-30b-a3b --scheme int4-g128 --tuning "$tables/s52_qwen3_int4_o2.json" \
    -M 192 256 --layout indexed contiguous >"$out/verify.txt" 2>&1
  timeout 120 "$build/moeq" verify --preset qwen3-30b-a3b --scheme int4-g128 --tuning "$tables/s52_qwen3_int4_ws8.json" \
    -M 192 256 --layout indexed contiguous >>"$out/verify.txt" 2>&1
  echo "verify rc=$? $(($(date +%s) - t0)) s"
  grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
  {
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 -M $qwen_m \
      --tuning "$shipped/qwen3-30b-a3b_mxfp4.json"
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M $oss_m \
      --tuning "$shipped/gpt-oss-120b_mxfp4.json"
  } >"$out/moeq_mxfp4_gemm.txt" 2>&1
  echo "mxfp4 gemms rc=$? $(($(date +%s) - t0)) s"
  timeout 100 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M 256 640 1024 \
    >"$out/moeq_layer.txt" 2>&1
  echo "layers rc=$? $(($(date +%s) - t0)) s"
else
  mkdir -p "$out/h"
  # shellcheck disable=SC2086
  HUMMING_TIMEOUT=150 OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" --preset qwen3-30b-a3b gpt-oss-120b \
    --scheme mxfp4 --tokens 1 16 64 256 640 1024 4096 >/dev/null 2>&1
  echo "humming mxfp4 gemms rc=$? $(($(date +%s) - t0)) s"
  mv "$out/h/humming.txt" "$out/humming_mxfp4_gemm.txt"
  # shellcheck disable=SC2086
  HUMMING_TIMEOUT=60 OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" --preset qwen3-30b-a3b \
    --scheme int4-g128 --tokens $int4_m >/dev/null 2>&1
  echo "humming int4 gemms rc=$? $(($(date +%s) - t0)) s"
  mv "$out/h/humming.txt" "$out/humming_int4_gemm.txt"
  HUMMING_TIMEOUT=150 OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" --layer --preset gpt-oss-120b \
    --scheme mxfp4 --tokens 256 640 1024 >/dev/null 2>&1
  echo "humming gpt-oss layers rc=$? $(($(date +%s) - t0)) s"
  mv "$out/h/humming.txt" "$out/humming_layer_gpt_oss.txt"
  rmdir "$out/h" 2>/dev/null
  tail -4 "$out"/humming_*.txt
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
