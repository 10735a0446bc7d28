#!/usr/bin/env bash
# Session 13, call E: the few-rows tile with a ring of 2 (8x64/1x2x2/2/r) in the planner and the
# shared A-fragment and scale helpers of the mma.sync bodies. Every GPU test (MoeGemmGpu on the
# planner's two direct tiles for every scheme), `moeq verify`, the warm-up test; the planner's GEMMs
# end to end on Qwen3-30B-A3B (two rounds), gpt-oss-120b and DeepSeek-V3 (one round), with the
# points session 12 left untimed (Qwen3 M = 4, 8-bit codes at M = 64, DeepSeek-V3 FP8-block M = 64
# against the 8-row copy-warp tile).
# Usage: v14_final.sh MOEQ_BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
evidence_setup "$1" "$1"
evidence_correctness "8x128/1x4x1/2/r 8x64/1x2x2/2/r"
bench() { timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 "$@" >>"$out/bench.txt" 2>&1; }
for round in 1 2; do
  for s in int4-g128 mxfp4 fp8-block; do bench --preset qwen3-30b-a3b --scheme $s -M 1 2 4 16 64; done
  echo "bench round $round $(($(date +%s) - t0)) s"
done
bench --preset gpt-oss-120b --scheme mxfp4 -M 1 16 64
for s in int4-g128 fp8-block; do bench --preset deepseek-v3 --scheme $s -M 1 16 64; done
bench --preset deepseek-v3 --scheme fp8-block -M 64 --tile 8x128/1x8x1/4/p
echo "bench done $(($(date +%s) - t0)) s"
