#!/usr/bin/env bash
# Session 33, call 8: the fused activation-quantize with two vectors' inputs loading ahead instead of one
# (call 7: 22.9% occupancy, at most two loads in flight a lane), and the review's follow-ups (the folded
# quantizer's slot count written into RoutingCfg; long rows in the fold's GPU test). Tests first, `moeq run
# --check` of the FP8 per-token layer, then the steps B N N B against the binary before it (`base`).
# Usage: v88_actq_prefetch.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
gpu_tests "" "FoldedQuantizerGpu.*:RoutingGpu.*:ElementwiseGpu.ActivationQuantizeEqualsActivationThenQuantize:ElementwiseGpu.QuantizersMatchReferenceBitExactly" 220
grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 1500
echo
timeout 60 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 7 --check >"$out/run.tmp" 2>&1
echo "run --check M=7 rc=$? $(grep -E "^check|rror" "$out/run.tmp" | tail -1)"
for who in base new new base; do
  timeout 80 "${bins[$who]}" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 16 16 64 256 1024 4096 >"$out/o.tmp" 2>&1
  echo "rc=$? $who $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$who" '{print s, $3, $4, $5}' >>"$out/steps.txt"
done
awk '{k=$1" "$2" "$3; s[k]+=$4; n[k]++; v[k]=v[k]" "$4} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" |
  sort -k2,2 -k3,3n -k1,1
timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:activation_quantize \
  "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 256 >"$out/ncu.tmp" 2>&1
echo "ncu new M=256 rc=$?: $(awk '/gpu__time_duration.sum/{print $NF}' "$out/ncu.tmp" | tail -4 | paste -sd' ')"
echo "done $(($(date +%s) - t0)) s"
