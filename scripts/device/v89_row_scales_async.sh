#!/usr/bin/env bash
# Session 34, call 1: the GEMMs' A-row scales fetched by a 4-byte cp.async instead of a load whose shared
# store made the fetching warps wait one global-load latency before their main loop. Tests that run row
# scales (4 gtest shards in parallel: they compile their kernels on the device), `moeq run --check` of
# Qwen3's FP8 per-token layer, GEMM1 / GEMM2 alone (bench and ncu) and the steps B N N B against the
# binary before it (`base`).
# Usage: v89_row_scales_async.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
filter="ExpertsGpu.RowScalesAfterKGroupsAndSplitK:ExpertsGpu.E4m3ActivationsOnEveryDirectTileMatchOracle"
filter="$filter:ExpertsGpu.E4m3ActivationsOnMxfp4WarpSpecializedTilesMatchOracle:ExpertsGpu.QuantizedActivationPairsMatchOracle"
filter="$filter:ExpertsGpu.DirectTilesOf24And32RowsMatchOracle"
for i in 0 1 2 3 4; do
  GTEST_TOTAL_SHARDS=5 GTEST_SHARD_INDEX=$i timeout 200 "$build/moeq_gpu_tests" --gtest_filter="$filter" \
    >"$out/gpu_tests_$i.txt" 2>&1 &
done
wait
echo "gpu tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|^\[  PASSED" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 1500
echo
for m in 7 256; do
  timeout 60 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M "$m" --check >"$out/run.tmp" 2>&1
  echo "run --check M=$m rc=$? $(grep -E "^check|rror" "$out/run.tmp" | tail -1)"
done
for who in base new new base; do
  timeout 60 "${bins[$who]}" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
    -M 16 256 4096 >"$out/o.tmp" 2>&1
  echo "rc=$? gemms $who $(($(date +%s) - t0)) s"
  grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
done
head -3 "$out/o.tmp"
awk '{k=$2" "$3" "$4" "$5; s[k]+=$6; n[k]++; v[k]=v[k]" "$1":"$6} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/gemms.txt" | sort
for who in base new; do
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:moe_gemm "${bins[$who]}" run \
    --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 256 >"$out/ncu_$who.txt" 2>&1
  echo "ncu $who M=256 rc=$?: $(awk '/gpu__time_duration.sum/{print $NF}' "$out/ncu_$who.txt" | tail -4 | paste -sd' ')"
done
for who in base new new base; do
  timeout 80 "${bins[$who]}" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 16 16 64 256 1024 4096 >"$out/o.tmp" 2>&1
  echo "rc=$? qwen3 $who $(($(date +%s) - t0)) s"
  grep -E '^layer  ' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
done
timeout 100 "$build/moeq" bench --trials 7 --kernel layer --preset deepseek-v3 --scheme mxfp4 mxfp4:fp8-token \
  -M 16 16 256 >"$out/o.tmp" 2>&1
echo "rc=$? deepseek new $(($(date +%s) - t0)) s"
grep -E '^layer  ' "$out/o.tmp" | awk '{print "new", $2, $3, $4, $5}' >>"$out/steps.txt"
awk '{k=$1" "$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" |
  sort -k2,2 -k3,3 -k4,4n -k1,1
echo "done $(($(date +%s) - t0)) s"
