#!/usr/bin/env bash
# DeepSeek-V3 MXFP4 at M = 16: ncu's time per kernel with bf16 and with FP8 per-token activations (the FP8
# layer measured +10% in v39).
# Usage: v40_deepseek_m16.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
ncu_scheme_times "--preset deepseek-v3 -M 16" mxfp4 mxfp4:fp8-token
