#!/usr/bin/env bash
# Session 46, call 4: the tables as shipped after call 2 (Qwen3-30B-A3B MXFP4 rows (4608, 5120] on 48x256/1x8x1/6/p/s/t;
# gpt-oss-120b MXFP4 rows (2560, 3072] on GEMM1 32x128/1x8x1/8/o2/p/t, GEMM2 32x512/1x8x1/8/p/t) against the previous
# ones (OLD_DIR), steps O N N O at M inside and beside the new ranges, then `moeq verify` there.
# Usage: v138_confirm_tables.sh BUILD OLD_DIR   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
old="$2"
for case in "qwen3-30b-a3b|576 600 640 704" "gpt-oss-120b|640 700 768 800"; do
  layer="${case%%|*}" tokens="${case#*|}"
  for who in O N N O; do
    # NOTE: N names the new file too, in case the binary embeds older tables.
    table=("--tuning" "$old/${layer}_mxfp4.json")
    [ $who = N ] && table=("--tuning" "$root/tuning/sm_90/${layer}_mxfp4.json")
    # shellcheck disable=SC2086
    timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset "$layer" --scheme mxfp4 -M $tokens "${table[@]}" \
      >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  done
  echo "steps $layer $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$4; t[k" "$1]+=$5; n[k" "$1]++} END {for (x in t) print x, t[x]/n[x]}' "$out/steps.txt" | sort
grep -h "gemm1" "$out/o.tmp" | head -2
{
  timeout 80 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4 --activation silu --layout indexed contiguous \
    -M 600 --codes prepared
  timeout 150 "$build/moeq" verify --preset gpt-oss-120b --scheme mxfp4 --activation swiglu-oai --layout indexed -M 700 \
    --codes prepared
} >"$out/verify.txt" 2>&1
echo "verify $(($(date +%s) - t0)) s"
grep -E "^(pass|FAIL)|verify:" "$out/verify.txt"
