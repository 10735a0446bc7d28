#!/usr/bin/env bash
# DeepSeek-V3 MXFP4 at M = 16 inside the layer bench's CUDA graph: ncu's duration of each kernel node of the
# first replayed applies (no cache flush), bf16 and FP8 per-token activations (v39: layers 624 / 686 us; v40:
# the kernels run alone 634 / 640).
# Usage: v41_deepseek_graph_nodes.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for scheme in mxfp4 mxfp4-fp8-token; do
  f="$out/graph-$scheme.txt"
  timeout 120 ncu --clock-control none --cache-control none --graph-profiling node -k regex:moeq_ -c 24 \
    --metrics gpu__time_duration.sum "$build/moeq" bench --trials 1 --iterations 2 --kernel layer \
    --preset deepseek-v3 --scheme "${scheme/-fp8/:fp8}" -M 16 >"$f" 2>&1
  echo "$scheme rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
    paste -sd' ')"
  grep -E "^layer  " "$f" | head -2
done
