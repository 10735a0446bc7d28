#!/usr/bin/env bash
# Session 34, call 7: the grouped scale ring (c738a75) on the MXFP4 layers call 4 did not time: DeepSeek-V3 and
# gpt-oss-20b, steps B N N B against 1ed8450 (`base`) at M where the tables run warp-specialized tiles.
# Usage: v95_other_mx_layers.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
for who in base new new base; do
  timeout 90 "${bins[$who]}" bench --trials 5 --kernel layer --preset gpt-oss-20b deepseek-v3 --scheme mxfp4 \
    -M 256 256 1024 2048 4096 >"$out/o.tmp" 2>&1
  echo "rc=$? steps $who $(($(date +%s) - t0)) s"
  grep -E '^layer  [gd]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5, $NF}' >>"$out/steps.txt"
done
awk '{k=$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$1":"$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" | sort
echo "done $(($(date +%s) - t0)) s"
