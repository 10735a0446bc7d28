#!/usr/bin/env bash
# Written at the end of session 26 for the next session's first call (not run yet): the 80-144-row pieces that
# session could not prove or time. MoeGemmGpu on the mma.sync tiles 80- and 96-row blocks run as without wgmma and
# on the 4-stage 80 / 96 candidates; `moeq tune` at ~64 rows per expert for Qwen3 INT4 and FP8-block (M = 1024;
# their tables keep 64-row entries there) and at M = 2048 / 4096 for DeepSeek-V3 MXFP4 (its tables keep 128-row
# entries where the planner now picks 80 / 144); picks go into the shipped tables by hand.
# Usage: v52_next_blocks.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
gpu_tests "80x128/2x4x1/4 96x128/2x4x1/4 80x256/1x8x1/4/p 96x256/1x8x1/4/p" 'MoeGemmGpu.EveryTile*' 200
tune_layers 150 "qwen3-30b-a3b int4-g128 512 1024" "qwen3-30b-a3b fp8-block 512 1024" "deepseek-v3 mxfp4 2048 4096"
