#!/usr/bin/env bash
# Re-tunes the Qwen3-30B-A3B MXFP4 table at small M (the shipped one, session 20, lost to the planner
# by 6% at M = 16: bench/results/2026-12-02-h200-quantizer-warps.md) over the 8- and 16-row
# candidates, then times the bf16 layer with the new table, the shipped one and the planner.
# Usage: v31_tune_qwen3_small.sh BUILD "TILE ..."   (env OUT; candidates compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
# shellcheck disable=SC2086
timeout 400 "$build/moeq" tune --preset qwen3-30b-a3b --scheme mxfp4 -M 1 2 4 8 16 32 64 128 256 --candidates $2 \
  --out "$out/qwen3-30b-a3b_mxfp4_small.json" >"$out/tune.txt" 2>&1
echo "tune rc=$? $(($(date +%s) - t0)) s"
tail -14 "$out/tune.txt"
for round in 1 2; do
  for how in new shipped planner; do
    case $how in
      new) flag="--tuning $out/qwen3-30b-a3b_mxfp4_small.json" ;;
      shipped) flag="" ;;
      planner) flag="--no-shipped-tuning" ;;
    esac
    # shellcheck disable=SC2086
    timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 \
      -M 1 4 16 64 256 $flag >>"$out/layer-$how.txt" 2>&1
    echo "$how $round: $(grep -E '^layer  qwen' "$out/layer-$how.txt" | tail -5 | awk '{print $4, $5}' | paste -sd' ')"
  done
done
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
