#!/usr/bin/env bash
# Session 24's closing evidence: the GPU tests that reach the quantized-activation planning
# (cuda::gemm_plan) and the e4m3 bodies, the warm-up test, and the Qwen3 MXFP4 layer with bf16 and
# FP8 per-token activations, prepared and canonical codes, then FP8 per token with --fp8-wgmma,
# M = 1024 and 4096, two rounds each.
# Usage: v38_e4m3_final.sh BUILD   (env OUT; Qwen3's kernels compiled on the workstation, the tiny ones here)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
# The tiny layers the tests run (16 processes; the warm-up test's layer with its activation).
warm_layers tiny "mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 nvfp4:fp8-token mxfp8:fp8-token fp8-channel:fp8-token fp8-block:fp8-token int4-g128:fp8-token int8-ch:fp8-token mxfp4 int4-g128" &
"$build/moeq" compile --preset tiny --scheme mxfp8:f16 --activation gelu_tanh >>"$out/warm.txt" 2>&1
wait
gpu_tests "" 'ExpertsGpu.QuantizedActivationPairsMatchOracle:ExpertsGpu.E4m3*:ExpertsGpu.RowScalesAfterKGroupsAndSplitK:ExpertsGpu.GraphCapture*:ExpertsGpu.OddShapes*:ExpertsGpu.TuningTableTilesMatchOracle' 300
timeout 150 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s: $(grep -E "PASSED|FAILED" "$out/warmup.txt" | head -2 | paste -sd' ')"
layer_rounds 2 --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token --codes prepared canonical -M 1024 4096
layer_rounds 2 --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --codes canonical -M 1024 4096 --fp8-wgmma
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
