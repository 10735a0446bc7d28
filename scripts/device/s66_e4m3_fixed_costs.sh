#!/usr/bin/env bash
# Written at the end of session 65 for the next session's first call (no device time was left to run it).
# Issue 5 at M = 4096: with no wgmma issued (MOEQ_DIAG_WS=8) the e4m3 step still took 804 of its 943 us (H200), more
# than the whole bf16 step. Where do those ~800 us go?
# diag: ran in session 66 as scripts/device/s66_e4m3_whole_k.sh diag (H100; the copies are the cost:
#   bench/results/2026-12-07-h100-s66-e4m3-whole-k.md).
# ncu: per-kernel times of one `moeq run` (M = 4096) for MOEQ_DIAG_WS 0, 8 and 56, and of the values path.
# unroll: docs/experiments/2026-12-07-e4m3-persistent-unroll-by-two.patch on this code (bin-unroll): its e4m3 tests,
#   then steps E and U in turn.
# Pack: .cache-device-s66.txz (bin = moeq and moeq_gpu_tests, bin-unroll the same with the patch; kernels: the st6
#   e4m3 layer for MOEQ_DIAG_WS 0, 8 and 56 and for bin-unroll, the shipped mxfp4:fp8-token layer). Session 65's did
#   not survive into session 66's checkout: build it again from the code it runs. Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66_e4m3_fixed_costs.sh all .cache-device/bin   (carry: [".cache-device-s66.txz"])
# Usage: s66_e4m3_fixed_costs.sh ncu|unroll|all BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
st6="$(cd "$(dirname "$0")" && pwd)/tables/s64_any_st6.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export STEP_TIMEOUT=150 STEP_CODES=canonical
if [ "$mode" = ncu ] || [ "$mode" = all ]; then
  for t in 0 8 56 N; do
    args=(--scheme mxfp4:fp8-token)
    diag=0
    if [ "$t" != N ]; then args+=(--fp8-wgmma --tuning "$st6"); diag=$t; fi
    MOEQ_DIAG_WS=$diag ncu_qwen3_times "$t" "$build/moeq" "${args[@]}"
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
