#!/usr/bin/env bash
# docs/experiments/2026-12-04-warm-up-threads.patch on the device: cold compiles of the default layer with 1 and 16
# threads, and moeq_gpu_warmup_test from an empty cache with BASE (Experts::warm_up compiling one program after
# another) and NEW (the patch: KernelCache::lookup_all on a thread per core), each timed.
# Usage: v133_warmup_threads.sh BASE NEW   (env OUT)
set -u
base="$1" new="$2"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
fresh() { export MOEQ_CACHE_DIR="$(mktemp -d)"; }
timed() { local s; s=$(date +%s%N); "$@"; local rc=$?; echo "rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms: $*"; }
fresh; timed "$new/moeq" compile -j 1 >"$out/compile_j1.txt" 2>&1; tail -1 "$out/compile_j1.txt"
fresh; timed "$new/moeq" compile -j 16 >"$out/compile_j16.txt" 2>&1; tail -1 "$out/compile_j16.txt"
for b in base new; do
  dir=$([ $b = base ] && echo "$base" || echo "$new")
  fresh; timed timeout 200 "$dir/moeq_gpu_warmup_test" >"$out/warmup_$b.txt" 2>&1
  grep -E "^\[  FAILED|^\[  PASSED|^\[       OK" "$out/warmup_$b.txt"
done
fresh; timed timeout 150 "$new/moeq" bench --kernel layer -M 16 >"$out/bench_cold_new.txt" 2>&1; tail -3 "$out/bench_cold_new.txt"
