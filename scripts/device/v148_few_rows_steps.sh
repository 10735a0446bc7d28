#!/usr/bin/env bash
# Session 48: v147's `moeq tune --steps --update` tables (7 layers, block-8 M) against the tables before them, whole
# steps O N N O (O: OLD_DIR's table, N: this tree's), at M in each layer's changed rows; then `moeq verify` (SiLU) of
# every changed layer with BUILD's embedded (new) tables at one changed M.
# Usage: v148_few_rows_steps.sh BUILD OLD_DIR   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
old_dir="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
# steps PRESET SCHEME "M ...": O N N O, one process each, lines "WHO PRESET M us" into steps.txt
steps() {
  for who in O N N O; do
    table="$old_dir/${1}_$2.json"
    [ "$who" = N ] && table="$root/tuning/sm_90/${1}_$2.json"
    # shellcheck disable=SC2086
    timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset "$1" --scheme "$2" -M $3 --tuning "$table" \
      >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" -v s="$2" '{print w, $2, s, $4, $5}' >>"$out/steps.txt"
    grep -E "^copy" "$out/o.tmp" | head -1
  done
  echo "steps $1 $2 $(($(date +%s) - t0)) s"
}
steps mixtral-8x7b mxfp4 "1 3 4"
steps mixtral-8x7b int4-g128 "1 24 32"
steps gpt-oss-120b mxfp4 "16 32 48 64"
steps gpt-oss-20b mxfp4 "4 8 12 16"
steps qwen3-30b-a3b mxfp4 "2 7 8"
steps qwen3-30b-a3b int4-g128 "2"
steps deepseek-v3 mxfp4 "1 24 32"
for job in "mixtral-8x7b mxfp4 1" "mixtral-8x7b int4-g128 1" "gpt-oss-120b mxfp4 32" "gpt-oss-20b mxfp4 8" \
  "qwen3-30b-a3b mxfp4 2 8" "qwen3-30b-a3b int4-g128 2" "deepseek-v3 mxfp4 1 32"; do
  # shellcheck disable=SC2086
  set -- $job
  p="$1" s="$2"
  shift 2
  [ $(($(date +%s) - t0)) -gt 520 ] && { echo "skipped verify $p $s: no time left"; continue; }
  start=$(date +%s)
  timeout 90 "$build/moeq" verify --preset "$p" --scheme "$s" --activation silu -M "$@" >>"$out/verify.txt" 2>&1
  echo "verify $p $s rc=$? $(($(date +%s) - start)) s"
done
grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
echo "done $(($(date +%s) - t0)) s"
