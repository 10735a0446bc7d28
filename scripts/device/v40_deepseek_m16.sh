#!/usr/bin/env bash
# DeepSeek-V3 MXFP4 at M = 16: ncu's time per kernel with bf16 and with FP8 per-token activations (the FP8
# layer measured +10% in v39).
# Usage: v40_deepseek_m16.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for scheme in mxfp4 mxfp4-fp8-token; do
  f="$out/ncu-$scheme.txt"
  timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run --preset deepseek-v3 \
    --scheme "${scheme/-fp8/:fp8}" -M 16 >"$f" 2>&1
  echo "ncu $scheme rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
    tail -8 | paste -sd' ')"
done
