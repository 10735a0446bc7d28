#!/usr/bin/env bash
# Session 32, call 3: which kernel boundary of Qwen3-30B-A3B's MXFP4 x FP8-per-token step loses under
# programmatic dependent launch (call 2: MOEQ_PDL=0 made that step 4 us faster at M = 256, the bf16 one 1 us
# slower). One process per MOEQ_PDL_SKIP setting (the kernels it names start only after the one before has
# finished), both schemes in each, M = 16 and 256, settings in one order then the reverse.
# Then the shipped tables of this build: `moeq run --check` and the step at M of session 32's entries.
# Usage: v77_pdl_boundaries.sh MOEQ   (env OUT, MOEQ_CACHE_DIR)
set -u
moeq="$1" out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
t0=$(date +%s)
settings=(none moeq_activation_quantize moeq_activation moeq_moe_gemm moeq_route_scatter moeq_topk_reduce
  moeq_route_count,moeq_route_fused)
order=("${settings[@]}")
for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[$i]}"); done
for s in "${order[@]}"; do
  [ $(($(date +%s) - t0)) -gt 500 ] && { echo "skipped $s: no time left"; continue; }
  skip="$s"
  [ "$s" = none ] && skip=""
  MOEQ_PDL_SKIP="$skip" timeout 40 "$moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token -M 16 16 256 >"$out/p.tmp" 2>&1
  echo "rc=$? skip=$s $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/p.tmp" | awk -v s="$s" '{print s, $3, $4, $5}' >>"$out/pdl_skip.txt"
done
sort -k2,2 -k3,3n -k1,1 "$out/pdl_skip.txt"
# The shipped tables of this build (session 32's entries) through Experts::apply against the float64 oracle, and
# timed without --tuning (the embedded tables).
# NOTE: the oracle is float64 on the CPU: M of the larger entries took too long for a call (their tiles passed
# `moeq tune`'s reference check in call 1).
for args in "qwen3-30b-a3b -M 3" "qwen3-30b-a3b -M 6" "gpt-oss-120b -M 3" "gpt-oss-120b -M 12" \
  "gpt-oss-120b -M 96" "qwen3-30b-a3b -M 576"; do
  [ $(($(date +%s) - t0)) -gt 480 ] && break
  # shellcheck disable=SC2086
  timeout 80 "$moeq" run --scheme mxfp4 --preset $args --check >"$out/run.tmp" 2>&1
  echo "run --check $args rc=$? $(grep -E "^check|rror" "$out/run.tmp" | tail -1)"
done
for p in "qwen3-30b-a3b -M 576 576 1152 2304" "gpt-oss-120b -M 640 640 96"; do
  [ $(($(date +%s) - t0)) -gt 560 ] && break
  # shellcheck disable=SC2086
  timeout 40 "$moeq" bench --trials 7 --kernel layer --scheme mxfp4 --preset $p 2>&1 | grep -E '^layer  ' |
    awk '{print "shipped", $2, $3, $4, $5}'
done
echo "done $(($(date +%s) - t0)) s"
