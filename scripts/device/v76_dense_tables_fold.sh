#!/usr/bin/env bash
# Session 32, call 2.
# (1) The folded quantizer after the review fixes (one wave of one CTA per SM, compiled into its own entry):
#     FoldedQuantizerGpu (the fold against the quantizer's own launch on every routing path), RoutingGpu, the
#     quantized layers of ExpertsGpu against the float64 oracle, the warm-up test.
# (2) Steps, this build against BINS/moeq_base (cf74b28), Qwen3-30B-A3B MXFP4 x FP8 per token, M where the
#     fold's warps-per-row rule changes (512-767) and where it does not (16, 256), A B B A.
# (3) The merged dense tables (NEW/<layer>.json) against the shipped ones (OLD/<layer>.json), whole steps,
#     A B B A, at the M the tune sampled, while the call's time lasts.
# (4) Issue 5's small-M gap: Qwen3 MXFP4 bf16 against FP8 per token at M = 16 / 256, with and without
#     programmatic dependent launch (MOEQ_PDL=0), one process per setting, both schemes in each.
# Usage: v76_dense_tables_fold.sh BUILD OLD NEW "PRESET:SCHEME:M,M ..."   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old="$2" new="$3"
touch "$out/.start"
tests_and_warmup 'FoldedQuantizerGpu.*:RoutingGpu.*:ExpertsGpu.*Quantized*:-RoutingGpu.PrintsTimings' 150
for binary in moeq moeq_base moeq_base moeq; do
  timeout 60 "$build/$binary" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
    -M 512 16 256 512 640 768 >"$out/l.tmp" 2>&1
  echo "rc=$? $binary" >>"$out/fold_steps.txt"
  grep -E '^layer  ' "$out/l.tmp" | tail -n +2 | sed "s/^/$binary /" >>"$out/fold_steps.txt"
done
echo "fold steps $(($(date +%s) - t0)) s"
awk '{print $1, $3, $4, $5, $6}' "$out/fold_steps.txt"
for item in $4; do
  preset="${item%%:*}" rest="${item#*:}"
  scheme="${rest%%:*}" tokens="${rest#*:}"
  [ $(($(date +%s) - t0)) -gt 500 ] && { echo "skipped $item: no time left"; continue; }
  ab new old "$preset" "$scheme" "$(echo "$tokens" | tr ',' ' ')" "--tuning $new/${preset}_${scheme}.json" \
    "--tuning $old/${preset}_${scheme}.json"
done
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
for pdl in 1 0 0 1; do
  [ $(($(date +%s) - t0)) -gt 540 ] && { echo "skipped pdl $pdl: no time left"; continue; }
  MOEQ_PDL=$pdl timeout 40 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token -M 16 16 256 >"$out/p.tmp" 2>&1
  echo "rc=$? pdl=$pdl" >>"$out/pdl.txt"
  grep -E '^layer  ' "$out/p.tmp" | sed "s/^/pdl=$pdl /" >>"$out/pdl.txt"
done
cat "$out/pdl.txt" 2>/dev/null
find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l
echo "done $(($(date +%s) - t0)) s"
