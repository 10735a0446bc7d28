#!/usr/bin/env bash
# Written at the end of session 65 for the next session's first call (no device time was left to run it).
# Issue 5 at M = 4096: with no wgmma issued (MOEQ_DIAG_WS=8) the e4m3 step still took 804 of its 943 us (H200), more
# than the whole bf16 step. Where do those ~800 us go?
# diag: Qwen3 M = 4096 e4m3 steps on the st6 table with MOEQ_DIAG_WS 0, 8 (no wgmma), 10 (and no dequantization),
#   24 (no wgmma, no token copies), 40 (no wgmma, no code copies), 56 (no wgmma, no copies at all); then the values
#   path and bf16 (timing only: the diagnostic results are wrong).
# ncu: per-kernel times of one `moeq run` (M = 4096) for MOEQ_DIAG_WS 0, 8 and 56, and of the values path.
# unroll: docs/experiments/2026-12-07-e4m3-persistent-unroll-by-two.patch on this code (bin-unroll): its e4m3 tests,
#   then steps E and U in turn.
# Pack: .cache-device-s66.txz (built at the end of session 65 from 218207c: bin = moeq and moeq_gpu_tests, bin-unroll
#   the same with the patch; kernels: the st6 e4m3 layer for every diag value above and for bin-unroll, the shipped
#   mxfp4:fp8-token and mxfp4 layers). Rebuild it if the code changed. Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66_e4m3_fixed_costs.sh all .cache-device/bin   (carry: [".cache-device-s66.txz"])
# Usage: s66_e4m3_fixed_costs.sh diag|ncu|unroll|all BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
st6="$(cd "$(dirname "$0")" && pwd)/tables/s64_any_st6.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export STEP_TIMEOUT=150 STEP_CODES=canonical
if [ "$mode" = diag ] || [ "$mode" = all ]; then
  for d in 0 8 10 24 40 56 0; do
    echo "diag $d" >>"$out/steps.txt"
    MOEQ_DIAG_WS=$d layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  done
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  cat "$out/steps.txt"
fi
if [ "$mode" = ncu ] || [ "$mode" = all ]; then
  for t in 0 8 56 N; do
    args=(--scheme mxfp4:fp8-token)
    diag=0
    if [ "$t" != N ]; then args+=(--fp8-wgmma --tuning "$st6"); diag=$t; fi
    MOEQ_DIAG_WS=$diag timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
      "$build/moeq" run --preset qwen3-30b-a3b "${args[@]}" --codes canonical -M 4096 >"$out/ncu_$t.csv" 2>&1
    echo "ncu $t rc=$? $(($(date +%s) - t0)) s"
    grep -E '"moeq_' "$out/ncu_$t.csv" | awk -F'","' '{print $5, $(NF)}' | sed 's/"//g' | head -7 | tr '\n' ';'
    echo
  done
fi
if [ "$mode" = unroll ] || [ "$mode" = all ]; then
  unroll="$(dirname "$build")/bin-unroll"
  timeout 300 "$unroll/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*' \
    >"$out/tests_unroll.txt" 2>&1
  echo "unroll tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests_unroll.txt" | sort -u
  for who in E U U E; do
    echo "$who" >>"$out/steps.txt"
    if [ "$who" = E ]; then layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
    else old_build="$unroll" layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P; fi
  done
  cat "$out/steps.txt"
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
