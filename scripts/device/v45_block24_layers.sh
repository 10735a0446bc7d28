#!/usr/bin/env bash
# Session 25, call 2: the experts step at the M of the new 24- and 16-row tiles with the shipped tables of
# the tree before them (built in) against the planner's new rules (--no-shipped-tuning), alternating, two
# rounds (each process times M twice; the first layer a process times runs slow, so the second counts);
# `moeq tune` at those M (the picks go into the shipped tables by hand); then every GPU test.
# Usage: v45_block24_layers.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
layer() {  # PRESET SCHEME M MODE
  local flag=""
  [ "$4" = planner ] && flag=--no-shipped-tuning
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset "$1" --scheme "$2" -M "$3" "$3" $flag \
    >"$out/l.tmp" 2>&1
  echo "$4 $1 $2 $3 rc=$? $(grep -E '^layer  ' "$out/l.tmp" | awk '{print $5}' | paste -sd' ') $(grep -E '^layer  ' "$out/l.tmp" | tail -1 | cut -c60-)" >>"$out/layer.txt"
}
for round in 1 2; do
  order="table planner"; [ "$round" = 2 ] && order="planner table"
  for case in "qwen3-30b-a3b mxfp4 256" "qwen3-30b-a3b int4-g128 256" "gpt-oss-120b mxfp4 256" "deepseek-v3 mxfp4 256" \
              "deepseek-v3 mxfp4 512"; do
    # shellcheck disable=SC2086
    for mode in $order; do layer $case "$mode"; done
  done
  echo "layers round $round $(($(date +%s) - t0)) s"
done
mkdir -p "$out/tables"
for case in "qwen3-30b-a3b mxfp4 256" "qwen3-30b-a3b int4-g128 256" "gpt-oss-120b mxfp4 256" "deepseek-v3 mxfp4 256 512"; do
  # shellcheck disable=SC2086
  set -- $case
  p="$1" s="$2"; shift 2
  timeout 150 "$build/moeq" tune --preset "$p" --scheme "$s" -M "$@" --out "$out/tables/${p}_${s}.json" >>"$out/tune.txt" 2>&1
  echo "tune $p $s rc=$? $(($(date +%s) - t0)) s"
done
(cd "$out" && tar cf tables.tar tables && rm -rf tables)
"$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
left=$((t0 + 570 - $(date +%s)))
gpu_tests "" 'ExpertsGpu.*:MoeGemmGpu.*' "$left"
