#!/usr/bin/env bash
# Where the step's time goes besides the GEMMs (session 27): ncu's duration of each kernel node inside the layer
# bench's CUDA graph, against the step's own time, for the layers where moeq's step loses more than its GEMMs do
# (gpt-oss-120b MXFP4 M = 2048: step 1605 us, GEMMs 893 + 499; Qwen3-30B-A3B MXFP4 M = 4096) and two small M;
# then the mma.sync fallback tiles of 80- and 96-row blocks (not yet run on a GPU).
# Usage: v53_step_nodes.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for c in "gpt-oss-120b mxfp4 2048" "qwen3-30b-a3b mxfp4 4096" "qwen3-30b-a3b mxfp4 64" "gpt-oss-120b mxfp4 1"; do
  set -- $c
  f="$out/nodes-$1-$3.txt"
  timeout 150 ncu --clock-control none --cache-control none --graph-profiling node -k regex:moeq_ -c 16 \
    --metrics gpu__time_duration.sum "$build/moeq" bench --trials 1 --iterations 2 --kernel layer \
    --preset "$1" --scheme "$2" -M "$3" >"$f" 2>&1
  echo "$c rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
    paste -sd' ')"
  layer_once nodes "$1" "$2" "$3"
  tail -1 "$out/layer.txt"
done
gpu_tests "80x128/2x4x1/4 96x128/2x4x1/4" 'MoeGemmGpu.EveryTile*' 150
