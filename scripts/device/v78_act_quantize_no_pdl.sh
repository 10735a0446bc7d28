#!/usr/bin/env bash
# Session 32, call 4: GEMM2's activation-quantize launched without programmatic stream serialization (the
# boundary call 3 found to cost the FP8 per-token step) against the build before it, Qwen3-30B-A3B MXFP4 with
# bf16 and FP8 per-token activations in each process (issue 5's side by side), M = 16 / 256 / 4096; binaries
# alternate F P P F F P.
# Usage: v78_act_quantize_no_pdl.sh DIR   (DIR holds moeq_fix and moeq_prefix; env OUT, MOEQ_CACHE_DIR)
set -u
dir="$1" out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
t0=$(date +%s)
for b in fix prefix prefix fix fix prefix; do
  [ $(($(date +%s) - t0)) -gt 480 ] && { echo "skipped $b: no time left"; continue; }
  timeout 60 "$dir/moeq_$b" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 16 16 256 4096 >"$out/b.tmp" 2>&1
  echo "rc=$? $b $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/b.tmp" | awk -v b="$b" '{print b, $3, $4, $5}' >>"$out/steps.txt"
done
sort -k2,2 -k3,3n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
