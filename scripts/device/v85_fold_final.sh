#!/usr/bin/env bash
# Session 33, call 5: the folded quantizer as committed (2 FP8 slots a lane; out of line in route_fused,
# inline in route_count) against call 2's binary (`base`: inline, 8 slots). Tests of the fold and the
# routing, `moeq run --check` of Qwen3's FP8 per-token layer against the float64 oracle, then the steps
# B N N B: Qwen3-30B-A3B and DeepSeek-V3 MXFP4, bf16 and FP8 per-token activations in each process.
# Usage: v85_fold_final.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
gpu_tests "" "FoldedQuantizerGpu.*:RoutingGpu.*" 120
grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 1500
echo
for m in 1 16; do
  timeout 80 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M "$m" --check >"$out/run.tmp" 2>&1
  echo "run --check M=$m rc=$? $(grep -E "^check|rror" "$out/run.tmp" | tail -1)"
done
for who in base new new base; do
  timeout 60 "${bins[$who]}" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 1 1 2 4 16 64 256 >"$out/o.tmp" 2>&1
  echo "rc=$? qwen3 $who $(($(date +%s) - t0)) s"
  grep -E '^layer  ' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  timeout 120 "${bins[$who]}" bench --trials 7 --kernel layer --preset deepseek-v3 --scheme mxfp4 mxfp4:fp8-token \
    -M 16 16 256 >"$out/o.tmp" 2>&1
  echo "rc=$? deepseek $who $(($(date +%s) - t0)) s"
  grep -E '^layer  ' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
done
awk '{k=$1" "$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" |
  sort -k2,2 -k3,3 -k4,4n -k1,1
echo "done $(($(date +%s) - t0)) s"
