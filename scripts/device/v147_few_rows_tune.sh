#!/usr/bin/env bash
# Session 48: the deeper few-rows rings (8x32/1x1x4/6/r and /8/r, 8x32/1x2x4/4/r, 8x64/1x2x2/8/r, 8x128/1x4x1/8/r,
# new tuning candidates) after v146's GEMM sweep (Mixtral-8x7B MXFP4 M = 1 GEMM2 35.9 -> 25.7 us). First the candidate
# test on them (every scheme they are legal for, against the dequantized product), then `moeq tune --steps --update`
# of the shipped tables over the block-8 M (8-row direct candidates only), in order of the gains v146 saw, each with
# a limit and the whole within DEADLINE seconds.
# Usage: v147_few_rows_tune.sh BUILD   (env OUT, MOEQ_CACHE_DIR, DEADLINE)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
new="8x32/1x1x4/6/r 8x32/1x1x4/8/r 8x32/1x2x4/4/r 8x64/1x2x2/8/r 8x128/1x4x1/8/r"
c="8x32/1x1x4/2/r 8x32/1x1x4/4/o4/r 8x32/1x1x4/6/r 8x32/1x1x4/8/r 8x32/1x2x4/4/r 8x64/1x1x4/4/r 8x64/1x2x2/2/r
8x64/1x2x2/4/r 8x64/1x2x2/8/r 8x64/1x4x1/2/r 8x128/1x4x1/2/r 8x128/1x4x1/4/r 8x128/1x4x1/4/o4/r 8x128/1x4x1/8/r
8x256/1x4x1/2/r 8x256/1x8x1/4/r"
warm_tiles "mxfp4 int4-g128 fp8-block nvfp4 int8-ch mxfp8" "$new"
gpu_tests "$new" "MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct" 150
grep -c "^candidate" "$out/gpu_tests.txt"
mkdir -p "$out/tables"
for job in "mixtral-8x7b mxfp4 1 2 4 8 16 32" "gpt-oss-120b mxfp4 1 2 4 8 16 32 64" "qwen3-30b-a3b mxfp4 1 2 4 8"     \
  "mixtral-8x7b int4-g128 1 2 4 8 16 32" "deepseek-v3 mxfp4 1 2 4 8 16 32" "gpt-oss-20b mxfp4 1 2 4 8 16"            \
  "qwen3-30b-a3b int4-g128 1 2 4 8"; do
  # shellcheck disable=SC2086
  set -- $job
  p="$1" s="$2"
  shift 2
  [ $(($(date +%s) - t0)) -gt "${DEADLINE:-480}" ] && { echo "stopped before $p $s: no time left"; continue; }
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout 150 "$build/moeq" tune --preset "$p" --scheme "$s" -M "$@" --steps --min-gain 2 --candidates $c \
    --update "$root/tuning/sm_90/${p}_$s.json" --out "$out/tables/${p}_$s.json" >>"$out/tune.txt" 2>&1
  echo "tune $p $s rc=$? $(($(date +%s) - start)) s"
done
grep -E "^ +[0-9]+ |^tune: [a-z]" "$out/tune.txt"
echo "done $(($(date +%s) - t0)) s"
