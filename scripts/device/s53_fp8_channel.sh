#!/usr/bin/env bash
# Session 53, after the bias: FP8 per-channel weights load their channel scales in the epilogue the same way, one
# (nt, r) pair at a time (write_output_tile_at). Trial: their kernels load every scale first, as kernels with a bias do.
# Prediction: Qwen3-30B-A3B fp8-channel GEMMs -0.5% to -3% (the most where one CTA an SM waits through its epilogue),
# the other formats' kernels unchanged (the change is compile-time on the format).
#  1. GPU tests: every format and layout against the oracle, and MoeGemmGpu's tile candidates (FP8 per channel on the
#     wgmma `/p` tile among the other schemes), then `moeq verify` of the layer.
#  2. GEMM1 / GEMM2 (the planner's tiles: no table ships for this scheme) and whole steps, OLD (9cb3a37) against BUILD,
#     O N N O.
# Usage: s53_fp8_channel.sh BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_build="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export MOEQ_TEST_TILES="128x256/1x8x1/4/p 8x64/1x4x1/2/r"
filtered_gpu_tests 'ExpertsGpu.EveryFormatEveryLayoutMatchesOracle:MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct' 170
layer_verify "qwen3-30b-a3b fp8-channel 16 256"
for who in O N N O; do
  bin="$build/moeq"
  [ "$who" = O ] && bin="$old_build/moeq"
  timeout 90 "$bin" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme fp8-channel -M 16 256 1024 4096 \
    2>&1 | grep -E "^gemm[12] " | sed "s/^/$who /" >>"$out/gemms.txt"
  echo "gemms $who $(($(date +%s) - t0)) s"
done
layer_steps shipped qwen3-30b-a3b fp8-channel "1 16 256 1024 4096" "O N N O"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
