#!/usr/bin/env bash
# The e4m3 warp-specialized tile at M = 4096 (Qwen3 MXFP4, canonical codes) on 128-row blocks with
# 4, 6 and 7 stages against the shipped table's 64-row tiles, bf16 beside FP8 per token: the layer
# and ncu's GEMM times.
# Usage: v37_e4m3_tiles.sh BUILD TABLES_DIR   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$2"
for table in shipped "$tables"/*.json; do
  args=()
  [ "$table" != shipped ] && args=(--tuning "$table")
  timeout 90 "$build/moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    --codes canonical -M 4096 "${args[@]}" >>"$out/layer.txt" 2>&1
  f="$out/ncu-$(basename "$table" .json).txt"
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k moeq_moe_gemm -c 2 "$build/moeq" run \
    --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --codes canonical -M 4096 "${args[@]}" >"$f" 2>&1
  echo "$(basename "$table") $(($(date +%s) - t0)) s: layer $(grep -E "^layer  qwen" "$out/layer.txt" | tail -2 |
    awk '{print $3, $5}' | paste -sd' '); e4m3 GEMMs $(awk '/gpu__time_duration.sum/{print $NF}' "$f" | paste -sd' ')"
done
