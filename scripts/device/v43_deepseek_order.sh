#!/usr/bin/env bash
# DeepSeek-V3 MXFP4 at M = 16, the FP8 per-token layer's +10% (v39) against order and graph length: the two
# schemes timed FP8-first, then bf16-first, with 20 and with 2 applies per graph.
# Usage: v43_deepseek_order.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for iterations in 20 2; do
  layer_rounds 1 --preset deepseek-v3 --scheme mxfp4:fp8-token mxfp4 -M 16 --iterations "$iterations"
  layer_rounds 1 --preset deepseek-v3 --scheme mxfp4 mxfp4:fp8-token -M 16 --iterations "$iterations"
done
