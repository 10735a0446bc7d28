#!/usr/bin/env bash
# Session 33, call 2: why the first kernel of Qwen3-30B-A3B's MXFP4 x FP8-per-token step takes twice the
# plain routing's time at M = 1 (ncu, call 1: route_fused 13.3 against 6.5 us; route_count at M = 16 7.3
# against 3.8). Steps timed (graphs) with the fold (default), without it (MOEQ_FOLD=0: the quantizer's own
# launch) and with the folded kernel but none of its quantizer CTAs (MOEQ_DIAG_FOLD_CTAS=0, timing only);
# then ncu's durations of the first kernels in each setting, cold (ncu's cache control) and warm, and the
# folded kernel's warp stall reasons at M = 1.
# Usage: v82_fold_halves.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
settings=(fold MOEQ_FOLD=0 MOEQ_DIAG_FOLD_CTAS=0)
order=("${settings[@]}")
for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[$i]}"); done
for s in "${order[@]}"; do
  envs=()
  [ "$s" != fold ] && envs=("$s")
  env "${envs[@]}" timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token -M 1 1 16 256 >"$out/o.tmp" 2>&1
  echo "rc=$? $s $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$s" '{print s, $3, $4, $5}' >>"$out/fold.txt"
done
sort -k2,2 -k3,3n -k1,1 "$out/fold.txt"
for s in fold MOEQ_FOLD=0 MOEQ_DIAG_FOLD_CTAS=0; do
  envs=()
  [ "$s" != fold ] && envs=("$s")
  for cache in all none; do
    for m in 1 16; do
      f="$out/ncu-$s-$cache-$m.txt"
      env "${envs[@]}" timeout 60 ncu --clock-control none --cache-control "$cache" --metrics gpu__time_duration.sum \
        "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M "$m" >"$f" 2>&1
      echo "ncu $s cache=$cache M=$m rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
        grep -E "route|quantize_activation" | tail -4 | paste -sd' ')"
    done
  done
done
timeout 90 ncu --clock-control none --section WarpStateStats --section LaunchStats -k regex:moeq_route_fused -s 4 -c 1 \
  "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 1 >"$out/ncu-stalls-fold.txt" 2>&1
echo "ncu stalls rc=$?"
timeout 90 ncu --clock-control none --section WarpStateStats --section LaunchStats -k regex:moeq_route_fused -s 4 -c 1 \
  "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4 -M 1 >"$out/ncu-stalls-plain.txt" 2>&1
echo "ncu stalls rc=$?"
grep -E "Stall|Warp Cycles|Registers|Threads|Duration" "$out/ncu-stalls-fold.txt" | head -30
echo "done $(($(date +%s) - t0)) s"
