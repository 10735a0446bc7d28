#!/usr/bin/env bash
# Session 26, call 1: 144-row blocks on the warp-specialized wgmma tile. Correctness on the new tiles
# (MoeGemmGpu every scheme, ExpertsGpu's 144-row test, routing align at 144), then GEMM1 / GEMM2 at
# M = 4096 (Qwen3 ~256 rows per expert, gpt-oss-120b ~128) and Qwen3 M = 2048 (~128) against the
# 128-row tile the planner and the shipped tables run there today; then the step, shipped table
# (128-row blocks) against the planner's new rule (--no-shipped-tuning: 144), alternating.
# Usage: v47_block144.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv >"$out/gpu.txt" 2>&1
new="144x256/1x8x1/4/p 144x256/1x8x1/3/p 144x128/1x8x1/4/p 144x128/1x8x1/6/p 144x128/2x4x1/4"
gpu_tests "$new" 'MoeGemmGpu.EveryTile*:ExpertsGpu.WarpSpecializedTilesOf144*:RoutingGpu.Align*' 200
tiles="128x256/1x8x1/4/p 144x256/1x8x1/4/p 144x256/1x8x1/3/p 144x128/1x8x1/4/p 144x128/1x8x1/6/p"
for case in "qwen3-30b-a3b mxfp4 4096" "qwen3-30b-a3b int4-g128 4096" "gpt-oss-120b mxfp4 4096" "qwen3-30b-a3b mxfp4 2048"; do
  # shellcheck disable=SC2086
  set -- $case
  # shellcheck disable=SC2086
  timeout 90 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$1" --scheme "$2" -M "$3" --tile $tiles \
    >>"$out/sweep.txt" 2>&1
  echo "sweep $case rc=$? $(($(date +%s) - t0)) s"
done
for round in 1 2; do
  for case in "qwen3-30b-a3b mxfp4 4096" "gpt-oss-120b mxfp4 4096"; do
    # shellcheck disable=SC2086
    if [ "$round" = 1 ]; then layer_once table $case; layer_once planner $case --no-shipped-tuning
    else layer_once planner $case --no-shipped-tuning; layer_once table $case; fi
  done
  echo "layers round $round $(($(date +%s) - t0)) s"
done
