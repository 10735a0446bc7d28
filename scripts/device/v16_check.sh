#!/usr/bin/env bash
# Session 15, call A: every GPU test, `moeq verify` and the warm-up test on main with the per-GEMM
# planner tiles (session 14 landed them without a device run); then wider warps for Qwen3 4-bit
# (64 channels per warp: 2 KB of codes per warp and K tile, as FP8 moves) against the planner's tile.
# Usage: v16_check.sh BUILD   (env OUT; SWEEP: "PRESET|M ...|TILE ..." lines)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
evidence_setup "$1" "$1"
sweep="${SWEEP:?SWEEP}"
warm_tiles "int4-g128 mxfp4 fp8-block" "$(sweep_tiles "$sweep")" &
evidence_correctness "8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r"
sweep_cases "$sweep"
echo "done $(($(date +%s) - t0)) s"
