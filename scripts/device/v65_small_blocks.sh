#!/usr/bin/env bash
# Session 30, call 3: (1) the direct 16- / 24- / 32-row tiles, which `moeq tune` never timed there (it tries
# the planner's block and its neighbours), at 32-64 rows per expert, where the shipped tables run 64- or
# 80-row warp-specialized tiles and Humming's 40- / 80-row ones win (gpt-oss-120b M = 1024 / 2048); two
# blocks of one expert run side by side in the grid's order, so the second read of its weights should
# come from L2. (2) ncu durations of every kernel of one Qwen3 MXFP4 step at M = 256, bf16 against FP8
# per-token activations (issue 5's +14%).
# Usage: v65_small_blocks.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tiles="24x128/1x4x1/4/r 24x128/1x4x1/2/r 16x128/1x4x1/2/r 32x128/1x4x1/2/r 32x128/1x8x1/4/o3 64x256/1x8x1/8/p 80x256/1x8x1/6/p/s"
bench_tile_cases "$tiles" "gpt-oss-120b mxfp4 1024 2048" "qwen3-30b-a3b mxfp4 512 1024" "qwen3-30b-a3b int4-g128 512 1024"
for s in mxfp4 mxfp4:fp8-token; do
  timeout 120 ncu --clock-control none -k regex:'^moeq' --launch-skip 60 --launch-count 16 --section SpeedOfLight \
    "$build/moeq" bench --kernel layer --preset qwen3-30b-a3b --scheme $s -M 256 --trials 1 --iterations 3 \
    >"$out/ncu_layer_$s.txt" 2>&1
  echo "ncu $s rc=$? $(($(date +%s) - t0)) s"
  grep -E "^  moeq|Duration" "$out/ncu_layer_$s.txt" | paste - - | awk '{print $1, $(NF)}' | head -16
done
