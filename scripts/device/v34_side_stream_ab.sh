#!/usr/bin/env bash
# The side stream on its own: the Qwen3 MXFP4 x FP8-token layer with it (BUILD) and without it
# (NOSIDE_MOEQ: the same tree with apply_cuda's side stream off), three rounds alternating, planner
# tiles; and the planner's GEMM tiles of the bf16 MXFP4 layer at M = 8 .. 64 (the re-tuned table's
# planner points: its JSON did not come back from call v33).
# Usage: v34_side_stream_ab.sh BUILD NOSIDE_MOEQ OLD_MOEQ   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
for round in 1 2 3; do
  for moeq in "$build/moeq" "$2"; do
    timeout 40 "$moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
      -M 16 64 256 --no-shipped-tuning >>"$out/layer.txt" 2>&1
    echo "$round $moeq: $(grep -E '^layer  qwen' "$out/layer.txt" | tail -3 | awk '{print $4, $5}' | paste -sd' ')"
  done
done
timeout 60 "$3" bench --trials 1 --iterations 2 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 \
  -M 8 16 32 64 >"$out/tiles.txt" 2>&1
grep -oE "^gemm[12] .*tile [^,]*" "$out/tiles.txt" | awk '{print $1, $4, $NF}'
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
