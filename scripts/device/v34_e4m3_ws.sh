#!/usr/bin/env bash
# MXFP4 x FP8 per token on the e4m3 warp-specialized tiles (kernels/moe_gemm_ws_e4m3.cuh): the GPU
# tests that reach them, then the Qwen3 layer with bf16 and FP8 per-token activations, prepared and
# canonical codes, M = 1024 and 4096, two rounds; the e4m3 layer against the same layer on the
# 16-bit values path (--no-fp8-tensor-cores); ncu's time per kernel at M = 4096.
# Usage: v34_e4m3_ws.sh BUILD   (env OUT; kernels compiled on the workstation into .cache-device)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
gpu_tests "" 'ExpertsGpu.E4m3*:ExpertsGpu.RowScalesAfterKGroupsAndSplitK:ElementwiseGpu.ActivationQuantize*' 240
layer_rounds 2 --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token --codes prepared canonical -M 1024 4096
timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
  --codes canonical -M 1024 4096 --no-fp8-tensor-cores >>"$out/layer.txt" 2>&1
echo "values path rc=$? $(($(date +%s) - t0)) s: $(grep -E "^layer  qwen" "$out/layer.txt" | tail -2 | awk '{print $4, $5}' | paste -sd' ')"
ncu_scheme_times "--preset qwen3-30b-a3b --codes canonical -M 4096" mxfp4:fp8-token mxfp4
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
