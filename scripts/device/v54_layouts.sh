#!/usr/bin/env bash
# The auto layout's threshold (contiguous from 64 rows per expert: set in session 1, never measured on a GPU,
# docs/design.md): the whole step with the indexed layout (GEMM1 gathers the token rows) against the contiguous one
# (a permute kernel, then GEMM1 on consecutive rows), alternating in one process per case, plus ncu's graph-node
# durations of the indexed step at the two layers v53 profiled contiguous.
# Usage: v54_layouts.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
export LAYER_TRIALS=7
for c in "qwen3-30b-a3b mxfp4 4096" "qwen3-30b-a3b mxfp4 2048" "qwen3-30b-a3b mxfp4 1024" "qwen3-30b-a3b int4-g128 4096" \
         "gpt-oss-120b mxfp4 2048" "gpt-oss-120b mxfp4 4096" "deepseek-v3 mxfp4 4096" "qwen3-30b-a3b mxfp4 512"; do
  set -- $c
  for round in 1 2; do
    for layout in indexed contiguous; do layer_once "$layout" "$1" "$2" "$3" --layout "$layout"; done
  done
  echo "$c $(($(date +%s) - t0)) s"
done
cat "$out/layer.txt"
for c in "gpt-oss-120b mxfp4 2048" "qwen3-30b-a3b mxfp4 4096"; do
  set -- $c
  f="$out/nodes-$1-$3.txt"
  timeout 150 ncu --clock-control none --cache-control none --graph-profiling node -k regex:moeq_ -c 12 \
    --metrics gpu__time_duration.sum "$build/moeq" bench --trials 1 --iterations 2 --kernel layer \
    --preset "$1" --scheme "$2" -M "$3" --layout indexed >"$f" 2>&1
  echo "$c indexed rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
    paste -sd' ')"
done
