#!/usr/bin/env bash
# Session 31, call 5: issue 5's side by side on the final build: MXFP4 weights with FP8 per-token against bf16
# activations, Qwen3-30B-A3B and DeepSeek-V3, M = 16 / 256 / 4096 (shipped tables, prepared codes). Per M two
# processes, the schemes in both orders, each timing M twice; the first line of a process dropped.
# Usage: v74_issue5_table.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for preset in qwen3-30b-a3b deepseek-v3; do
  for m in 16 256 4096; do
    for schemes in "mxfp4:fp8-token mxfp4" "mxfp4 mxfp4:fp8-token"; do
      # shellcheck disable=SC2086
      timeout 90 "$build/moeq" bench --trials 7 --kernel layer --preset $preset --scheme $schemes -M $m $m \
        >"$out/l.tmp" 2>&1
      echo "rc=$? $preset $m $schemes" >>"$out/steps.txt"
      grep -E '^layer  ' "$out/l.tmp" | tail -n +2 >>"$out/steps.txt"
    done
    echo "$preset $m $(($(date +%s) - t0)) s"
  done
done
awk '{print $3, $4, $5}' "$out/steps.txt"
