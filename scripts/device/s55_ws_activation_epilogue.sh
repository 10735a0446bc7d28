#!/usr/bin/env bash
# Session 54's branch exp/ws-activation-epilogue, proven and timed (one call): a warp-specialized GEMM1 applies the
# activation in its epilogue and writes GEMM2's input (in the MMA's K order from `/t` tiles; [gate | up] rows loaded
# paired), so the steps of the shipped tables' warp-specialized rows have no activation kernel.
# 1. The tests that run it: MoeGemmGpu.ActivationEpilogueEqualsGemm1ThenActivation (ten warp-specialized cases:
#    interleaved, non-gated and [gate | up] rows; canonical, prepared and bulk-copied codes; staged 512-channel
#    scales; persistent on 2 CTAs), the layer oracle over every format and the odd shapes (M = 129 runs 64-row `/t`
#    tiles in whole steps), the warm-up test; `moeq verify` of gpt-oss-120b (SwiGLU-OAI interleaved, and SiLU as
#    [gate | up] rows) and Qwen3-30B-A3B MXFP4 at M = 640 / 1024 (the fused steps against the CPU reference).
# 2. Whole steps, N = shipped (fused), A = MOEQ_FUSED_ACTIVATION=0 (the activation kernel), N A A N: gpt-oss-120b and
#    Qwen3-30B-A3B MXFP4 at M = 256-2048 (M = 256: gpt-oss's direct tiles, unchanged; Qwen3's warp-specialized).
# Prediction (H100): the activation kernel's ~15-30 us and half GEMM1's output bytes: -2% to -4% a step where GEMM1 is
# warp-specialized.
# Usage: s55_ws_activation_epilogue.sh BUILD   (env OUT, MOEQ_CACHE_DIR; pack scripts/device/lists/s55_pack.txt)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
filtered_gpu_tests 'MoeGemmGpu.ActivationEpilogue*:ExpertsGpu.EveryFormatEveryLayout*:ExpertsGpu.OddShapes*' 260
VERIFY_ACTIVATIONS=swiglu-oai layer_verify "gpt-oss-120b mxfp4 640 1024"
layer_verify "gpt-oss-120b mxfp4 640" "qwen3-30b-a3b mxfp4 640 1024"
layer_steps shipped gpt-oss-120b mxfp4 "256 640 1024 2048" "N A A N"
layer_steps shipped qwen3-30b-a3b mxfp4 "256 640 1024 2048" "N A A N"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
