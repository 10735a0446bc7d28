#!/usr/bin/env bash
# docs/experiments/2026-12-06-ws-activation-epilogue.patch, second run (two calls): the activation in a warp-specialized
# GEMM1's epilogue, now reading the output tile in 16-byte shared loads. Session 55 measured the first version correct
# and not faster: its epilogue read the tile in sixteen 2-byte loads a chunk, conflicted 8 ways in the shared banks
# (ncu: fused GEMM1 630.8 us against 594.0 + 26.1 for GEMM1 and the activation, gpt-oss-120b M = 1024).
# 1. The tests that run it: MoeGemmGpu.ActivationEpilogueEqualsGemm1ThenActivation (the direct tiles' and ten
#    warp-specialized cases, bit for bit against GEMM1 then the activation kernel), the layer oracle over every format,
#    the odd shapes, the warm-up test; `moeq verify` of gpt-oss-120b (SwiGLU-OAI interleaved, SiLU as [gate | up] rows)
#    and Qwen3-30B-A3B MXFP4.
# 2. Whole steps, shipped tables: N = the patch (fused), A = MOEQ_FUSED_ACTIVATION=0 (the activation kernel: the same
#    kernels as main), O = main d7a272b's binary ($MOEQ_CACHE_DIR/bin/moeq_main, whose direct 8-row tiles fuse with the
#    2-byte loads). N A A N from M = 256; N O O N at M = 1 / 4 / 16, where only the direct tiles fuse.
# 3. The fused steps' kernels under ncu (gpt-oss-120b and Qwen3-30B-A3B MXFP4, M = 640 / 1024), in one tar (a call
#    brings back few files).
# Prediction (H100): the fused GEMM1 within ~5 us of the plain one, so steps -2% to -3% at gpt-oss-120b M = 1024 and
# Qwen3 M = 640-1024 (the activation kernel's 15-26 us); the direct tiles' steps at M <= 16 unchanged to -0.5 us.
# PART 1 = parts 1 and 2 above (session 55's script on this build: ~410 s on the H100), PART 2 = the rest (~150 s), both
# by default. Two calls on one warm machine: the second carries nothing, so the first's unpacked cache stays there.
# Usage: s56_ws_epilogue_vector_loads.sh BUILD [PART]   (env OUT, MOEQ_CACHE_DIR; pack scripts/device/lists/s56_pack.txt)
part="${2:-all}"
[ "$part" = 2 ] || bash "$(dirname "$0")/s55_ws_activation_epilogue.sh" "$1"
[ "$part" = 1 ] && exit 0
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
# O: main's binary, from a folder of its own (layer_steps runs $old_build/moeq).
old_build="$(mktemp -d)" && ln -s "$MOEQ_CACHE_DIR/bin/moeq_main" "$old_build/moeq"
layer_steps shipped gpt-oss-120b mxfp4 "1 4 16" "N O O N"
layer_steps shipped qwen3-30b-a3b mxfp4 "1 4 16" "N O O N"
ncu_out="$(mktemp -d)"
for preset in gpt-oss-120b qwen3-30b-a3b; do
  OUT="$ncu_out" PRESET=$preset STEP_ONLY=1 TAG="_$preset" bash "$(dirname "$0")/s55_step_kernels.sh" "$build/moeq" 640 1024
done
tar czf "$out/ncu_steps.tgz" -C "$ncu_out" .
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
