#!/usr/bin/env bash
# Issue 5 at M = 4096: the e4m3 consumers with one base per row (its largest MX exponent over K) and a promotion
# window (kE4m3PromoteTiles, MOEQ_DIAG_E4M3_WINDOW): tile j + 1's MMAs queue behind tile j's while the warpgroup
# decodes, and the partial is waited for and promoted once per window instead of once per 128-k tile.
# check: the e4m3 tests (the GEMM bit-equality of `/p`, `/t` and `/s/t` tiles, the layer oracle on every e4m3 tile,
#   the e2m1 -> e4m3 table), then `moeq verify --fp8-wgmma` of Qwen3-30B-A3B at M = 256 / 1024 on the st6 table with
#   windows 1, 2 (default) and 4: the error each window costs.
# time: Qwen3-30B-A3B, canonical codes, M = 4096, one process per column, in the order
#   bf16 N | FP8 N | O:st6 | E:st6 W1 W2 W4 W4 W2 W1 | O:st6 | FP8 N | bf16 N
#   (O: the previous main's e4m3 body, 429fdf6, from OLD_BUILD).
# Prediction: W1 (the old chain, less the shuffles) ~ O; W2 -10 to -20% on GEMM1 (half the waits and promotions, the
# MMAs of the next tile queued during the decode); W4 a few % more.
# ncu: each kernel of one step, W1 / W2 / W4 and the values path (ncu_*.csv).
# Usage: s64_e4m3_window.sh check|time|ncu|all BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
old_build="$3"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$mode" = check ] || [ "$mode" = all ]; then
  tests='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*:Fp8MmaGpu.*'
  timeout 300 "$build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests.txt" | sort -u
  for w in 1 2 4; do
    MOEQ_DIAG_E4M3_WINDOW=$w timeout 150 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma \
      --codes canonical --tuning "$tables/s63_st6.json" --activation silu -M 256 1024 --layout indexed contiguous \
      >"$out/verify_w$w.txt" 2>&1
    echo "verify W$w rc=$? $(($(date +%s) - t0)) s: $(grep -cE '^pass' "$out/verify_w$w.txt") pass"
    grep -E "^(pass|FAIL)" "$out/verify_w$w.txt" | head -4
  done
fi
if [ "$mode" = time ] || [ "$mode" = all ]; then
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  st6="$tables/s63_st6.json"
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 O
  for w in 1 2 4 4 2 1; do
    echo "W$w" >>"$out/steps.txt"
    MOEQ_DIAG_E4M3_WINDOW=$w layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  done
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 O
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
fi
if [ "$mode" = ncu ] || [ "$mode" = all ]; then
  for t in W1 W2 W4 N; do
    case "$t" in
      N) args=(--scheme mxfp4:fp8-token) ;;
      *) args=(--scheme mxfp4:fp8-token --fp8-wgmma --tuning "$tables/s63_st6.json") ;;
    esac
    w="${t#W}"
    [ "$t" = N ] && w=2  # the values path compiles no e4m3 GEMM; the window is read once, 1-16
    MOEQ_DIAG_E4M3_WINDOW="$w" timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
      "$build/moeq" run --preset qwen3-30b-a3b "${args[@]}" --codes canonical -M 4096 >"$out/ncu_$t.csv" 2>&1
    echo "ncu $t rc=$? $(($(date +%s) - t0)) s"
  done
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
