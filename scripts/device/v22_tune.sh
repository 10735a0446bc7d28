#!/usr/bin/env bash
# Session 19's host work, first on a GPU (next session's first call): the tuning tables and
# `moeq tune`. ExpertsGpu.TuningTableTilesMatchOracle and the warm-up test; `moeq bench` (its GEMM
# timing moved into tools/moeq/gemm_timing.cpp) against BINS/moeq_base (c19fd5c, the bench before
# the move) on the same tiles; then `moeq tune` on Qwen3-30B-A3B MXFP4 and INT4 at a few M (its
# run time is part of the answer), and the tuned tables timed by `moeq bench --tuning` beside the
# planner's picks.
# Usage: v22_tune.sh BUILD BINS   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
# Every candidate tile, sharded over the cores (the base's kernels are the same texts: no device
# header changed after c19fd5c).
"$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
gpu_tests "" 'ExpertsGpu.TuningTableTilesMatchOracle' 150
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/warmup.txt")"
for v in base new; do
  moeq="$build/moeq"; [ "$v" = base ] && moeq="$bins/moeq_base"
  timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 int4-g128 \
    -M 16 256 >"$out/bench_$v.txt" 2>&1
done
echo "bench rc=$? $(($(date +%s) - t0)) s"
for s in mxfp4 int4-g128; do
  timeout 150 "$build/moeq" tune --preset qwen3-30b-a3b --scheme "$s" -M 1 4 16 64 256 \
    --out "$out/qwen3-$s.json" >"$out/tune_$s.txt" 2>&1
  echo "tune $s rc=$? $(($(date +%s) - t0)) s"
  timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme "$s" \
    -M 1 4 16 64 256 --tuning "$out/qwen3-$s.json" >>"$out/tune_$s.txt" 2>&1
done
echo "done $(($(date +%s) - t0)) s"
