#!/usr/bin/env bash
# Session 33, call 1: where issue 5's constant ~5-6 us at small M goes (Qwen3-30B-A3B MXFP4, FP8 per token
# against bf16: +5 us at M = 1, +5.8 at M = 16, +13 at M = 256). Each kernel of the step is left out in
# turn (MOEQ_DIAG_OMIT: timing only, the results are wrong) and the step timed in the same process for both
# schemes; a kernel's marginal cost in the graph is the step's time less the step without it. Settings in
# one order then the reverse. Then ncu's per-kernel durations of both steps at M = 1 and 16.
# Usage: v81_omit_kernels.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
settings=(none moeq_moe_gemm@0%2 moeq_moe_gemm@1%2 moeq_activation,moeq_activation_quantize moeq_topk_reduce)
order=("${settings[@]}")
for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[$i]}"); done
for s in "${order[@]}"; do
  omit="$s"
  [ "$s" = none ] && omit=""
  MOEQ_DIAG_OMIT="$omit" timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token -M 1 1 16 256 >"$out/o.tmp" 2>&1
  echo "rc=$? omit=$s $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$s" '{print s, $3, $4, $5}' >>"$out/omit.txt"
done
cat "$out/o.tmp" | tail -5
sort -k2,2 -k3,3n -k1,1 "$out/omit.txt"
for scheme in mxfp4 mxfp4:fp8-token; do
  for m in 1 16; do
    f="$out/ncu-${scheme//:/-}-$m.txt"
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run --preset qwen3-30b-a3b \
      --scheme "$scheme" -M "$m" >"$f" 2>&1
    echo "ncu $scheme $m rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
      tail -6 | paste -sd' ')"
  done
done
echo "done $(($(date +%s) - t0)) s"
