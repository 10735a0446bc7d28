#!/usr/bin/env bash
# Session 47, call 6: the binaries with this session's shipped tables (Mixtral MXFP4 and FP8-block, DeepSeek-V3
# INT4-g128, Qwen3 MXFP4 rows (4096, 5120]): `moeq verify` on those layers at M in their tuned rows, then whole steps
# of the shipped tables (no --tuning) against the planner's rules (--no-shipped-tuning), P S S P.
# Usage: v142_shipped_tables.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
verify() {  # PRESET SCHEME LAYOUTS M...
  local p="$1" s="$2" layouts="$3"
  shift 3
  # shellcheck disable=SC2086
  timeout 150 "$build/moeq" verify --preset "$p" --scheme "$s" --layout $layouts --activation silu -M "$@" \
    >>"$out/verify.txt" 2>&1
  echo "verify $p $s rc=$? $(($(date +%s) - t0)) s"
}
verify mixtral-8x7b mxfp4 "indexed contiguous masked" 4 32 128
verify mixtral-8x7b fp8-block "indexed contiguous" 32 128
verify qwen3-30b-a3b mxfp4 "indexed masked" 544
verify deepseek-v3 int4-g128 "indexed" 256
grep -E "FAIL|pass|rel" "$out/verify.txt" | tail -30
steps() {  # PRESET SCHEME "M ..."
  local who flag
  for who in P S S P; do
    [ $(($(date +%s) - t0)) -gt 520 ] && { echo "skipped steps $1 $2 $who"; continue; }
    flag=""
    [ "$who" = P ] && flag=--no-shipped-tuning
    # shellcheck disable=SC2086
    timeout 90 "$build/moeq" bench --trials 5 --kernel layer --preset "$1" --scheme "$2" -M $3 $flag >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  done
  echo "steps $1 $2 $(($(date +%s) - t0)) s"
}
steps mixtral-8x7b mxfp4 "4 32 128"
steps deepseek-v3 int4-g128 "1 256"
awk '{k=$2" "$3" "$4; t[k" "$1]+=$5; n[k" "$1]++} END {for (x in t) print x, t[x]/n[x], n[x]}' "$out/steps.txt" | sort
echo "done $(($(date +%s) - t0)) s"
