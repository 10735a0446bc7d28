#!/usr/bin/env bash
# Session 39, call 6: quantized activations on `/t` tiles (the quantizers write their 16-bit values in the MMA's K
# order) and the Qwen3 MXFP4 table's new gaps. Tests; then whole steps, O = commit 375e996's binary, N = this one,
# O N N O: bf16 Qwen3 MXFP4 at M = 2048 / 4096 with each binary's shipped table (the table change), FP8 per token and
# MXFP8 activations at M = 1024 / 4096 with 375e996's table for both (the quantizers' order alone); then issue 5's
# FP8 per token against bf16 (this binary, schemes interleaved per M).
# Usage: v117_quantized_mma_order.sh BUILD   (env OUT, MOEQ_CACHE_DIR; $MOEQ_CACHE_DIR/bin/moeq_375, tables117/)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old="$MOEQ_CACHE_DIR/bin/moeq_375" table="$MOEQ_CACHE_DIR/tables117/qwen3_old.json"
timeout 200 "$build/moeq_gpu_tests" \
  --gtest_filter='ElementwiseGpu.MmaOrder*:ExpertsGpu.MmaOrderTilesMatchOracle:FoldedQuantizerGpu.*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|differ|rel |not at" "$out/gpu_tests.txt" | head -20
timeout 100 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |Failure" "$out/warmup.txt" | head
for who in O N N O; do
  bin="$build/moeq"
  [ "$who" = O ] && bin="$old"
  timeout 60 "$bin" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 -M 2048 2048 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  timeout 90 "$bin" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token mxfp4:mxfp8 \
    -M 1024 1024 4096 --tuning "$table" >"$out/o.tmp" 2>&1
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  echo "steps $who $(($(date +%s) - t0)) s"
done
sort -k2,3 -k4,4n -k1,1 "$out/steps.txt"
for m in 16 256 4096; do
  timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M $m $m >>"$out/issue5.txt" 2>&1
done
grep -E '^layer  q|^copy' "$out/issue5.txt" | cut -c1-110
echo "done $(($(date +%s) - t0)) s"
