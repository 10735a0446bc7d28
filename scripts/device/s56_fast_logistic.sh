#!/usr/bin/env bash
# The warp-specialized activation epilogue (docs/experiments/2026-12-06-ws-activation-epilogue.patch) with a cheaper
# epilogue (session 56, one call). Calls 1-2 of this session measured the patch correct and not faster: its fused
# GEMM1 ran 5.7-26.5 us over the plain one (ncu), about the activation kernel it replaced. Its chunk loop was 398 SASS
# instructions per 8 outputs (SwiGLU-OAI; the plain epilogue ~30): expf and IEEE division (~35 a logistic, with a
# slow-path call) and four 64-bit store addresses. Now the logistic is ex2.approx + rcp.approx (both activation paths,
# so the fused and plain steps stay bit-identical) and the four stores share one address: 213 a chunk.
# 1. Tests: ElementwiseGpu (the activations within 1 ulp of the reference, every kind; the `/t` order), the epilogue's
#    bit-equality test, the layer oracle over every format and the odd shapes, the warm-up test; `moeq verify` of
#    gpt-oss-120b (SwiGLU-OAI interleaved, SiLU as [gate | up]) and Qwen3-30B-A3B MXFP4 at M = 640 / 1024.
# 2. Steps, shipped tables: N = this build (fused), A = MOEQ_FUSED_ACTIVATION=0 (plain GEMM1 + activation kernel, both
#    with the new logistic), O = main d7a272b's moeq (bin/moeq_main; main's kernels since: accurate logistic, no ws fusion), N A O O A N.
# 3. The GEMM1s under ncu, fused and plain, M = 1024 (one tar).
# Prediction (H100): fused GEMM1 ~12 us over the plain one at gpt-oss-120b M = 1024 (was 26.5), ~6 at Qwen3 (was 13.1):
# steps -1.4% at gpt-oss M = 1024, -3% at Qwen3 M = 640 / 1024 against A and O; M = 1 unchanged to -0.3 us.
# Usage: s56_fast_logistic.sh BUILD   (env OUT, MOEQ_CACHE_DIR; pack scripts/device/lists/s56b_pack.txt)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
filtered_gpu_tests 'ElementwiseGpu.*:MoeGemmGpu.ActivationEpilogue*:ExpertsGpu.EveryFormatEveryLayout*:ExpertsGpu.OddShapes*' 300
VERIFY_ACTIVATIONS=swiglu-oai layer_verify "gpt-oss-120b mxfp4 640 1024"
layer_verify "gpt-oss-120b mxfp4 640" "qwen3-30b-a3b mxfp4 640 1024"
old_build="$(mktemp -d)" && ln -s "$MOEQ_CACHE_DIR/bin/moeq_main" "$old_build/moeq"
layer_steps shipped gpt-oss-120b mxfp4 "1 640 1024" "N A O O A N"
layer_steps shipped qwen3-30b-a3b mxfp4 "1 640 1024" "N A O O A N"
ncu_out="$(mktemp -d)"
for preset in gpt-oss-120b qwen3-30b-a3b; do
  for fused in 1 0; do
    OUT="$ncu_out" FUSED=$fused PRESET=$preset STEP_ONLY=1 TAG="_${preset}_fused$fused" \
      bash "$(dirname "$0")/s55_step_kernels.sh" "$build/moeq" 1024
  done
done
tar czf "$out/ncu_steps.tgz" -C "$ncu_out" .
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
