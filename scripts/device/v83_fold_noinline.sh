#!/usr/bin/env bash
# Session 33, call 3: the folded quantizer out of line (`__noinline__`: the routing half of the folded
# kernel no longer spills nor shares its code with the quantizer's unrolled body). Tests first, then the
# steps of both schemes, Qwen3-30B-A3B MXFP4, base (inline, call 2's binary) against new, B N N B B N, and
# ncu of the first kernel at M = 1 and 16 for both binaries.
# Usage: v83_fold_noinline.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
tests_and_warmup "FoldedQuantizerGpu.*:RoutingGpu.*:ExpertsGpu.QuantizedActivationPairsMatchOracle" 240
for who in base new new base base new; do
  bin="$build/moeq"
  [ "$who" = base ] && bin="$base_moeq"
  timeout 60 "$bin" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 1 1 16 256 >"$out/o.tmp" 2>&1
  echo "rc=$? $who $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$who" '{print s, $3, $4, $5}' >>"$out/steps.txt"
done
sort -k2,2 -k3,3n -k1,1 "$out/steps.txt" | awk '{k=$1" "$2" "$3; s[k]+=$4; n[k]++; v[k]=v[k]" "$4} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' | sort -k2,2 -k3,3n -k1,1
for who in base new; do
  bin="$build/moeq"
  [ "$who" = base ] && bin="$base_moeq"
  for m in 1 16; do
    f="$out/ncu-$who-$m.txt"
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum "$bin" run --preset qwen3-30b-a3b \
      --scheme mxfp4:fp8-token -M "$m" >"$f" 2>&1
    echo "ncu $who M=$m rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
      grep -E "route" | tail -4 | paste -sd' ')"
  done
done
echo "done $(($(date +%s) - t0)) s"
