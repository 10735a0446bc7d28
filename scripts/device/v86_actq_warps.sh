#!/usr/bin/env bash
# Session 33, call 6: GEMM2's fused activation-quantize (FP8 per token) by warps per row. At Qwen3 M = 256 its
# marginal cost in the step is 7.6 us against the plain activation's 2.3 (call 1); the warps-per-row rule gives
# it one warp per row there (256 blocks >= 132 SMs), so a lane computes its 3 vectors of the row in turn.
# MOEQ_DIAG_ACTQ_WARPS forces 1, 2, 4 or 8 (results exact); settings in one order, then the reverse; then ncu
# of the kernel alone at M = 256 and 1024.
# Usage: v86_actq_warps.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
settings=(rule 1 2 4 8)
order=("${settings[@]}")
for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[$i]}"); done
for s in "${order[@]}"; do
  envs=()
  [ "$s" != rule ] && envs=("MOEQ_DIAG_ACTQ_WARPS=$s")
  env "${envs[@]}" timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token -M 16 16 64 256 1024 >"$out/o.tmp" 2>&1
  echo "rc=$? $s $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$s" '{print s, $3, $4, $5}' >>"$out/actq.txt"
done
awk '{k=$2" "$3" "$1; s[k]+=$4; n[k]++; v[k]=v[k]" "$4} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/actq.txt" |
  sort -k1,1 -k2,2n -k3,3
for s in rule 1 2 4; do
  for m in 256 1024; do
    envs=()
    [ "$s" != rule ] && envs=("MOEQ_DIAG_ACTQ_WARPS=$s")
    env "${envs[@]}" timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:activation_quantize \
      "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M "$m" >"$out/ncu.tmp" 2>&1
    echo "ncu warps=$s M=$m rc=$?: $(awk '/gpu__time_duration.sum/{print $NF}' "$out/ncu.tmp" | tail -4 | paste -sd' ')"
  done
done
echo "done $(($(date +%s) - t0)) s"
