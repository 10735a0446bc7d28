#!/usr/bin/env bash
# Two questions session 56's approximate logistic opens (one call; pack scripts/device/lists/s57_pack.txt):
# 1. The 8-row direct tiles fuse the activation only up to 16 slots (cuda::kActivationEpilogueMaxRows): session 51
#    measured +4.0 us at gpt-oss-120b M = 16 (64 slots) with accurate expf and IEEE division in the epilogue. With the
#    logistic ~4x cheaper, does fusing pay at 32-1280 slots? N = as shipped (16), W = MOEQ_FUSED_ACTIVATION_MAX_ROWS=
#    $WIDE_ROWS (2048: every direct row of the four tables), N W W N at the M where the tables run direct tiles past
#    16 slots. `moeq verify` with W first (the fused direct kernels at those M against the CPU reference).
# 2. The warp-specialized fusion (landed in session 56 on gpt-oss-120b and Qwen3 MXFP4 evidence) on the other layers
#    whose tables run `/p/t` GEMM1 rows: Qwen3-30B-A3B INT4-g128, Mixtral-8x7B INT4-g128, DeepSeek-V3 FP8-block.
#    N = fused, A = MOEQ_FUSED_ACTIVATION=0, N A A N.
# Prediction (H100): 1. W <= N within ~0.5 us at 32-128 slots, -1 to -3 us from 256 slots (the activation kernel's
# launch and its pass over [rows, 2I]), unless the epilogue's registers cost a CTA an SM (keeps_occupancy then says
# no, and W = N). 2. N <= A within the spread, as gpt-oss-120b and Qwen3 MXFP4 in session 56 (-0.7% / 0.0% to -0.7%).
# Mixtral-8x7B (top 2): direct tiles up to 64 slots (M = 32), a 16-row sync tile at 65-128 slots, `/p/t` from 129.
# Registers (session 57, offline: cuobjdump of the kernels `moeq compile` builds, prepared codes; keeps_occupancy
# compares CTAs an SM by registers): W fuses where the table runs an `/o4` tile (fused and plain both 128 registers,
# 4 CTAs) or 8x64/1x2x2/2 (MXFP4 91-94, 5 CTAs). It cannot fuse gpt-oss-120b's 8x64/1x4x1/2 (M >= 16: 56 -> 60-61
# registers, 9 -> 8 CTAs) nor Qwen3 INT4's 8x128/1x4x1/4 and /2 (M = 4, 8, 32: 128 -> 144-148, 95 -> 112-113), so W
# runs N's kernels there: gpt-oss M = 16 and Qwen3 INT4 M = 4 stay as controls (W = N within the spread).
# If W wins, set kActivationEpilogueMaxRows from the rows where it does (or drop the limit) and rerun the warm-up test.
# Usage: s57_epilogue_rows_and_layers.sh BUILD   (env OUT, MOEQ_CACHE_DIR, WIDE_ROWS)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
export WIDE_ROWS="${WIDE_ROWS:-2048}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
MOEQ_FUSED_ACTIVATION_MAX_ROWS=$WIDE_ROWS VERIFY_ACTIVATIONS=swiglu-oai layer_verify "gpt-oss-120b mxfp4 8"
MOEQ_FUSED_ACTIVATION_MAX_ROWS=$WIDE_ROWS layer_verify "qwen3-30b-a3b mxfp4 16 64" "qwen3-30b-a3b int4-g128 16 128" \
  "mixtral-8x7b int4-g128 32"
layer_steps shipped gpt-oss-120b mxfp4 "8 16" "N W W N"
layer_steps shipped qwen3-30b-a3b mxfp4 "4 8 16 32 64 128" "N W W N"
layer_steps shipped qwen3-30b-a3b int4-g128 "4 16 64 160" "N W W N"
layer_steps shipped mixtral-8x7b int4-g128 "16 32" "N W W N"
layer_steps shipped qwen3-30b-a3b int4-g128 "640 1024" "N A A N"
layer_steps shipped mixtral-8x7b int4-g128 "128 512 1024" "N A A N"
layer_steps shipped deepseek-v3 fp8-block "1024" "N A A N"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
