#!/usr/bin/env bash
# Issue 5 at M = 4096, second step of session 64: on MMA-order (`/t`) e4m3 tiles the producer warpgroup's two idle
# warps scan each output tile's scales (row bases, wide K tiles) into a row-buffer slot while the consumers run the
# tile before, instead of the consumers scanning at the start of every output tile (~70 us of the step: the step
# without the scan, s64_e4m3_window.sh scan). The window stays 1 (one promotion per 128-k tile, as DeepGEMM).
# check: the e4m3 tests, then `moeq verify --fp8-wgmma` of Qwen3-30B-A3B at M = 256 / 1024 on st6 (window 1 and 4).
# time: Qwen3-30B-A3B, canonical codes, M = 4096, one process per column, in the order
#   bf16 N | FP8 N | P:st6 | E:st6 E:st6 | P:st6 | E:st6 W4 | FP8 N | bf16 N
#   (P: the previous main's e4m3 body, 429fdf6, from OLD_BUILD; E: this build).
# Prediction: E -50 to -70 us against the consumer-side scan's 995 us (s64_e4m3_window.sh time, same H100 kind),
#   i.e. ~925-945 us; still above the values path (~887).
# ncu: each kernel of one step, E and the values path (ncu_*.csv).
# ncufull: GEMM1 under ncu's full set, E and the values path (details page, csv).
# source: the e4m3 GEMM1's SASS with ncu's warp-stall samples per instruction (source_E.csv.xz).
# Usage: s64_e4m3_scan.sh check|time|ncu|ncufull|source|all BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
old_build="$3"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
st6="$tables/s63_st6.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$mode" = check ] || [ "$mode" = all ]; then
  tests='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*:Fp8MmaGpu.*:ElementwiseGpu.MmaOrder*'
  timeout 300 "$build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests.txt" | sort -u
  for w in 1 4; do
    MOEQ_DIAG_E4M3_WINDOW=$w timeout 150 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma \
      --codes canonical --tuning "$st6" --activation silu -M 256 1024 --layout indexed contiguous >"$out/verify_w$w.txt" 2>&1
    echo "verify W$w rc=$? $(($(date +%s) - t0)) s: $(grep -cE '^pass' "$out/verify_w$w.txt") pass"
    grep -E "^(pass|FAIL)" "$out/verify_w$w.txt" | head -4
  done
fi
if [ "$mode" = time ] || [ "$mode" = all ]; then
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P
  echo "W4" >>"$out/steps.txt"
  MOEQ_DIAG_E4M3_WINDOW=4 layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  cat "$out/steps.txt"
fi
if [ "$mode" = ncu ] || [ "$mode" = all ]; then
  for t in E N; do
    args=(--scheme mxfp4:fp8-token)
    [ "$t" = E ] && args+=(--fp8-wgmma --tuning "$st6")
    timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
      "$build/moeq" run --preset qwen3-30b-a3b "${args[@]}" --codes canonical -M 4096 >"$out/ncu_$t.csv" 2>&1
    echo "ncu $t rc=$? $(($(date +%s) - t0)) s"
    grep -E '"moeq_' "$out/ncu_$t.csv" | awk -F'","' '{print $5, $(NF)}' | sed 's/"//g' | head -7 | tr '\n' ';'
    echo
  done
fi
if [ "$mode" = source ]; then
  # The e4m3 GEMM1 (first moeq_moe_gemm launch) under ncu's source counters: the SASS with its warp-stall samples.
  timeout 250 ncu --section SourceCounters --section WarpStateStats --kernel-name moeq_moe_gemm --launch-count 1 \
    -o "$out/source_E" "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma --tuning "$st6" \
    --codes canonical -M 4096 >"$out/source_E.log" 2>&1
  echo "source rc=$? $(($(date +%s) - t0)) s"
  ncu --import "$out/source_E.ncu-rep" --page source --csv --print-source sass >"$out/source_E.csv" 2>&1
  echo "import rc=$? $(wc -c <"$out/source_E.csv") bytes"
  xz -6 "$out/source_E.csv"
  rm -f "$out/source_E.ncu-rep"
fi
if [ "$mode" = ncufull ]; then
  # GEMM1 of one step under ncu's full set (the first moeq_moe_gemm launch), E and the values path: where the e4m3
  # GEMM1's ~2900 cycles per 128-k tile go (stall reasons, memory throughput, tensor pipe).
  for t in E N; do
    args=(--scheme mxfp4:fp8-token)
    [ "$t" = E ] && args+=(--fp8-wgmma --tuning "$st6")
    timeout 250 ncu --set full --kernel-name moeq_moe_gemm --launch-count 1 --csv --page details \
      "$build/moeq" run --preset qwen3-30b-a3b "${args[@]}" --codes canonical -M 4096 >"$out/ncufull_$t.csv" 2>&1
    echo "ncufull $t rc=$? $(($(date +%s) - t0)) s"
  done
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
