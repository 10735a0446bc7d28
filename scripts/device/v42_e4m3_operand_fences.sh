#!/usr/bin/env bash
# The e4m3 warp-specialized consumers with operand fences around each tile's MMAs (no ptxas-injected
# warpgroup.arrive): its GPU test, then the Qwen3 MXFP4 x FP8 per-token layer with --fp8-wgmma against
# the values path and bf16 (canonical codes, M = 1024 and 4096, two rounds) and ncu's e4m3 GEMM times.
# Usage: v42_e4m3_operand_fences.sh BUILD   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
gpu_tests "" 'ExpertsGpu.E4m3ActivationsOnMxfp4WarpSpecializedTilesMatchOracle' 120
layer_rounds 2 --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token --codes canonical -M 1024 4096
layer_rounds 2 --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --codes canonical -M 1024 4096 --fp8-wgmma
timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k moeq_moe_gemm -c 2 "$build/moeq" run \
  --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --codes canonical -M 4096 --fp8-wgmma >"$out/ncu.txt" 2>&1
echo "ncu e4m3 GEMMs rc=$?: $(awk '/gpu__time_duration.sum/{print $NF}' "$out/ncu.txt" | paste -sd' ')"
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
