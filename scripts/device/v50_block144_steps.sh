#!/usr/bin/env bash
# Session 26, call 4: the step at M = 2048 and 4096 with the shipped tables (144-row entries) against the
# tables before them (.cache-device/old_tables, --tuning), alternating in one call; then Humming's step
# and GEMMs at those M and moeq's GEMMs (planner: 144 rows) in the same call.
# Usage: v50_block144_steps.sh BUILD   (env OUT; Humming's wheels in .cache-device/wheels)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
export LAYER_TRIALS=7
root="$(cd "$(dirname "$0")/../.." && pwd)"
old="$root/.cache-device/old_tables"
deadline=$((t0 + 420))
for round in 1 2; do
  for case in "qwen3-30b-a3b mxfp4 4096" "gpt-oss-120b mxfp4 4096" "qwen3-30b-a3b mxfp4 2048" "qwen3-30b-a3b int4-g128 4096"; do
    # shellcheck disable=SC2086
    set -- $case
    if [ "$round" = 1 ]; then layer_once old "$@" --tuning "$old/${1}_${2}.json"; layer_once new "$@"
    else layer_once new "$@"; layer_once old "$@" --tuning "$old/${1}_${2}.json"; fi
  done
  echo "layers round $round $(($(date +%s) - t0)) s"
done
timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 -M 2048 4096 >>"$out/gemm.txt" 2>&1
timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M 2048 4096 >>"$out/gemm.txt" 2>&1
echo "gemms $(($(date +%s) - t0)) s"
left=$((deadline - $(date +%s) - 70))
HUMMING_TIMEOUT=$left OUT="$out/kernels" bash "$root/scripts/device/humming_anchor.sh" --preset qwen3-30b-a3b gpt-oss-120b \
  --scheme mxfp4 --tokens 2048 4096 >/dev/null 2>&1
echo "humming kernels rc=$? $(($(date +%s) - t0)) s"
left=$((deadline - $(date +%s)))
HUMMING_TIMEOUT=$left OUT="$out/layer" bash "$root/scripts/device/humming_anchor.sh" --layer --preset qwen3-30b-a3b \
  gpt-oss-120b --scheme mxfp4 --tokens 2048 4096 >/dev/null 2>&1
echo "humming layer rc=$? $(($(date +%s) - t0)) s"
layer_once new qwen3-30b-a3b mxfp4 4096
layer_once new gpt-oss-120b mxfp4 4096
echo "done $(($(date +%s) - t0)) s"
