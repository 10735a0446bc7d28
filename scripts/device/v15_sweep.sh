#!/usr/bin/env bash
# Session 14, call D: small-M tiles (more K groups, fewer channels per warp) against the planner's
# few-rows tile, GEMM1 and GEMM2, INT4, MXFP4 and FP8-block, one process per scheme and case.
# Usage: v15_sweep.sh BUILD   (env OUT; CASES: "PRESET|M ...|TILE ..." lines)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
cases="${CASES:?CASES}"
schemes="int4-g128 mxfp4 fp8-block"
warm_tiles "$schemes" "$(sweep_tiles "$cases")"
sweep_cases "$cases"
