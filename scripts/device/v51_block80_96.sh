#!/usr/bin/env bash
# Session 26, call 5: 80- and 96-row blocks on the warp-specialized wgmma tile. Correctness (MoeGemmGpu on the
# new tiles, every scheme; ExpertsGpu's 80-144-row test incl. the planner's own 80 and 144; routing align at 80
# and 96), then GEMM1 / GEMM2 at ~64 rows per expert (gpt-oss-120b M = 2048, Qwen3-30B-A3B M = 1024) against
# the 64- and 128-row tiles, and the step: shipped table against the planner's new rule (--no-shipped-tuning).
# Usage: v51_block80_96.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
gpu_tests "80x256/1x8x1/6/p 96x256/1x8x1/6/p" \
  'MoeGemmGpu.EveryTile*:ExpertsGpu.WarpSpecializedTilesOf80To144*:RoutingGpu.Align*' 150
tiles="64x256/1x8x1/8/p 128x256/1x8x1/5/p 80x256/1x8x1/6/p 80x256/1x8x1/4/p 96x256/1x8x1/6/p 96x256/1x8x1/4/p"
for case in "gpt-oss-120b mxfp4 2048" "qwen3-30b-a3b mxfp4 1024"; do
  # shellcheck disable=SC2086
  set -- $case
  # shellcheck disable=SC2086
  timeout 50 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$1" --scheme "$2" -M "$3" --tile $tiles \
    >>"$out/sweep.txt" 2>&1
  echo "sweep $case rc=$? $(($(date +%s) - t0)) s"
done
# shellcheck disable=SC2086
for mode in table planner table planner; do
  if [ $mode = table ]; then layer_once table gpt-oss-120b mxfp4 2048; else layer_once planner gpt-oss-120b mxfp4 2048 --no-shipped-tuning; fi
done
echo "layers $(($(date +%s) - t0)) s"
