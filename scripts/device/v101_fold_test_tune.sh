#!/usr/bin/env bash
# Session 37, call 1: the GPU fold test with session 36's last assertion (a false word changes exactly the
# kernels gemm_folds_mx_scales names) and the device scale read-back (max_device_byte), never run on a GPU;
# then `moeq tune --update` on the MXFP4 tables of Qwen3-30B-A3B and gpt-oss-120b at M = 1024-4096 over the
# warp-specialized candidates (the fold changed the consumers' cost), each updated table against the
# shipped one as whole steps, A B B A.
# Usage: v101_fold_test_tune.sh BUILD "PRESET:M,M:TILE,TILE ..."   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
timeout 150 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.MxScalesAtMostTwo*' >"$out/gpu_tests_fold.txt" 2>&1
echo "fold test rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|differ" "$out/gpu_tests_fold.txt" | head -20 | cut -c1-200
for item in $2; do
  IFS=: read -r preset tokens tiles <<<"$item"
  tokens="$(echo "$tokens" | tr ',' ' ')" tiles="$(echo "$tiles" | tr ',' ' ')"
  shipped="$root/tuning/sm_90/${preset}_mxfp4.json" updated="$out/${preset}_mxfp4.json"
  # shellcheck disable=SC2086
  timeout 170 "$build/moeq" tune --preset "$preset" --scheme mxfp4 -M $tokens --candidates $tiles --min-gain 3 \
    --update "$shipped" --out "$updated" >>"$out/tune.txt" 2>&1
  echo "tune $preset rc=$? $(($(date +%s) - t0)) s"
  cmp -s "$shipped" "$updated" && { echo "$preset: table unchanged"; continue; }
  for t in new old old new; do
    [ $(($(date +%s) - t0)) -gt 500 ] && { echo "skipped $t: no time left"; continue; }
    table="$shipped"
    [ "$t" = new ] && table="$updated"
    # shellcheck disable=SC2086
    timeout 40 "$build/moeq" bench --trials 7 --kernel layer --preset "$preset" --scheme mxfp4 -M $tokens \
      --tuning "$table" >"$out/s.tmp" 2>&1
    grep -E "^layer  $preset" "$out/s.tmp" | awk -v t="$t" '{print t, $2, $3, $4, $5}' >>"$out/steps.txt"
  done
done
grep -v "^tune: wrote" "$out/tune.txt" | tail -60
[ -f "$out/steps.txt" ] && sort -k2,2 -k3,3n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
