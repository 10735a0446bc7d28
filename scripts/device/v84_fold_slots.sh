#!/usr/bin/env bash
# Session 33, call 4: the folded FP8 per-token quantizer with 2 slots a lane instead of 8, inline
# (`inline2`) and out of line (`noinline2`, this build), against call 2's binary (`base`: inline, 8 slots).
# GPU tests of the fold and routing on this build first; then the steps of both schemes, Qwen3-30B-A3B
# MXFP4, binaries in the order B I N N I B; then ncu's durations of the first kernel(s) at M = 1, 16, 256.
# Usage: v84_fold_slots.sh BUILD BASE_MOEQ INLINE2_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [inline2]="$3" [noinline2]="$build/moeq")
gpu_tests "" "FoldedQuantizerGpu.*:RoutingGpu.*" 120
grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 1500
echo
for who in base inline2 noinline2 noinline2 inline2 base; do
  timeout 60 "${bins[$who]}" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 1 1 16 256 >"$out/o.tmp" 2>&1
  echo "rc=$? $who $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$who" '{print s, $3, $4, $5}' >>"$out/steps.txt"
done
sort -k2,2 -k3,3n -k1,1 "$out/steps.txt" | awk '{k=$1" "$2" "$3; s[k]+=$4; n[k]++; v[k]=v[k]" "$4} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' | sort -k2,2 -k3,3n -k1,1
for who in base inline2 noinline2; do
  for m in 1 16 256; do
    f="$out/ncu-$who-$m.txt"
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum "${bins[$who]}" run --preset qwen3-30b-a3b \
      --scheme mxfp4:fp8-token -M "$m" >"$f" 2>&1
    echo "ncu $who M=$m rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
      grep -E "route" | tail -4 | paste -sd' ')"
  done
done
echo "done $(($(date +%s) - t0)) s"
