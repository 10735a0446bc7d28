#!/usr/bin/env bash
# The activation epilogue with the approximate logistic (session 56) on two more layers whose shipped tables run
# warp-specialized GEMM1 rows: Qwen3-30B-A3B INT4-g128 (the bar's layer) and Mixtral-8x7B INT4-g128. Whole steps,
# N = this build (fused), A = MOEQ_FUSED_ACTIVATION=0 (plain GEMM1 + the activation kernel), N A A N. Short: the
# session's last device seconds.
# Prediction (H100): N <= A within the spread, as at gpt-oss-120b and Qwen3 MXFP4 (call 8: -0.7% / 0.0% to -0.7%).
# Usage: s56_other_layers.sh BUILD   (env OUT, MOEQ_CACHE_DIR; pack scripts/device/lists/s56c_pack.txt)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
layer_steps shipped qwen3-30b-a3b int4-g128 "640 1024" "N A A N"
layer_steps shipped mixtral-8x7b int4-g128 "256 1024" "N A A N"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
