#!/usr/bin/env bash
# Issue 5 at M = 4096: where the e4m3 wgmma body (`--fp8-wgmma`: canonical MXFP4 x FP8 per token, e4m3 MMAs with a
# promotion per 128-k tile, the permuting producer) stands today against the 16-bit values path and the bf16 step.
# Session 24 measured it at 670 us against the 16-bit tile's 526 (GEMM1 alone); the 16-bit body has since gained the
# `/t` order, persistent tiles and 144-row blocks (GEMM1 378 us), the e4m3 body none of them.
# Prediction: the e4m3 step slower than the values path by 10-30% (its serial wait and promote per K tile).
# Whole steps of Qwen3-30B-A3B, canonical codes, M = 4096, one process each, in the order bf16 N | FP8 N E E N |
# bf16 N (N: FP8 per token on the values path; E: the same with --fp8-wgmma); steps.txt.
# Usage: s62_e4m3_body.sh BUILD   (env OUT, MOEQ_CACHE_DIR; cold kernels compile in the first process of each kind)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export STEP_TIMEOUT=150 STEP_CODES=canonical
layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 "N E E N"
layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
