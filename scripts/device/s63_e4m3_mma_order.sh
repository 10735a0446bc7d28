#!/usr/bin/env bash
# Issue 5 at M = 4096: the e4m3 wgmma body on `/t` tiles (the quantizers write the FP8 per-token codes in the e4m3
# consumers' K order, and wgmma reads the copy ring's staging itself: no permute warps, no permuted buffers) against
# the same body on `/p` tiles (permuting producer) and against the 16-bit values path and bf16, whole steps.
# check: the tests that cover the change (the quantizers' order, the folded quantizer, the e4m3 GEMM bit-equality of
# `/p`, `/t` and `/s/t` tiles, the e4m3 layer oracle on `/t` and `/s/t` tiles), then `moeq verify --fp8-wgmma` of
# Qwen3-30B-A3B at M = 256 / 1024 with each table.
# time: Qwen3-30B-A3B, canonical codes, M = 4096, one process per column, in the order
#   bf16 N | FP8 N | E:p4 E:t4 E:t8 E:st6 E:st6 E:t8 E:t4 E:p4 | FP8 N | bf16 N
# where E:X is `--fp8-wgmma` with the table tables/s63_X.json (one entry: 128x256/1x8x1/S/p[/s][/t] for both GEMMs,
# run by the e4m3 consumers as 128x128; p4: 4 stages, permuting; t4 / t8: MMA-order tokens, 4 / 8 stages; st6:
# persistent, MMA-order tokens, 6 stages).
# Prediction: /t 4-10% faster than /p per step at the same stages (session 24: no permute 620 -> 583 us GEMM1);
# 8 stages a few % more (the permuted buffers' 48 KB freed); persistent a further 10-20% (session 24: ~6 us per CTA
# of fixed cost against ~1.1 us per K tile, 16 K tiles a GEMM1 CTA).
# ncu: each kernel of one step (p4, st6, the values path N, bf16) under ncu, gpu__time_duration (ncu_*.csv).
# quick: the three e4m3 tests (not the folded quantizer's), then time without t4 (for a short device budget).
# Usage: s63_e4m3_mma_order.sh check|time|ncu|both|quick BUILD   (env OUT, MOEQ_CACHE_DIR; both = all three)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
tests='ElementwiseGpu.MmaOrderMovesEveryElementToItsPosition:ExpertsGpu.E4m3ActivationsOnMxfp4WarpSpecializedTilesMatchOracle:MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile'
[ "$mode" != quick ] && tests="$tests:FoldedQuantizerGpu.*"
if [ "$mode" = check ] || [ "$mode" = both ] || [ "$mode" = quick ]; then
  timeout 300 "$build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests.txt" | sort -u
fi
if [ "$mode" = check ] || [ "$mode" = both ]; then
  for t in p4 t8 st6; do
    timeout 150 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma --codes canonical \
      --tuning "$tables/s63_$t.json" --activation silu -M 256 1024 --layout indexed contiguous >>"$out/verify.txt" 2>&1
    echo "verify $t rc=$? $(($(date +%s) - t0)) s"
  done
  grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
fi
if [ "$mode" = time ] || [ "$mode" = both ] || [ "$mode" = quick ]; then
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  order="p4 t4 t8 st6 st6 t8 t4 p4"
  [ "$mode" = quick ] && order="p4 t8 st6 st6 t8 p4"
  for t in $order; do layer_steps "$tables/s63_$t.json" qwen3-30b-a3b mxfp4:fp8-token 4096 E; done
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
fi
if [ "$mode" = ncu ] || [ "$mode" = both ]; then
  # Each kernel of one step alone (caches flushed, clocks left alone): where the e4m3 step's time goes, kernel by kernel,
  # beside the values path's (ncu_N.csv) and bf16's (ncu_bf16.csv).
  for t in p4 st6 N bf16; do
    case "$t" in
      N) args=(--scheme mxfp4:fp8-token) ;;
      bf16) args=(--scheme mxfp4) ;;
      *) args=(--scheme mxfp4:fp8-token --fp8-wgmma --tuning "$tables/s63_$t.json") ;;
    esac
    timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum "$build/moeq" run --preset qwen3-30b-a3b \
      "${args[@]}" --codes canonical -M 4096 >"$out/ncu_$t.csv" 2>&1
    echo "ncu $t rc=$? $(($(date +%s) - t0)) s"
  done
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
