#!/usr/bin/env bash
# Session 37, call 5: one lane per permute warp arrives on `permuted` and `staged` (N) instead of every permute
# thread (O: MOEQ_DIAG_WS=64, the scheme before), after call 3 put the warp-specialized tile's pure
# synchronization at 160 us of gpt-oss-120b GEMM1's 657 at M = 1024. Tests of the warp-specialized tiles (every
# format, persistent, e4m3, 512 channels), then the shipped tables' GEMMs and steps O N N O, and the skeleton
# (MOEQ_DIAG_WS=63 against 127) once.
# Usage: v104_permute_arrivals.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
tiles="48x256/1x8x1/6/p 128x256/1x8x1/4/p 144x256/1x8x1/4/p 80x256/1x8x1/6/p 96x256/1x8x1/6/p 48x256/1x8x1/8/p 48x512/1x8x1/6/p/s 48x512/1x8x1/4/p/s 64x512/1x8x1/4/p/s 64x256/1x8x1/8/p/s 48x256/1x8x1/6/p/s 144x256/1x8x1/3/p/s"
MOEQ_TEST_TILES="$tiles" timeout 240 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests_gemm.txt" 2>&1 &
timeout 240 "$build/moeq_gpu_tests" \
  --gtest_filter='ExpertsGpu.E4m3ActivationsOnMxfp4WarpSpecializedTilesMatchOracle:ExpertsGpu.PersistentTilesMatchOracle' \
  >"$out/gpu_tests_experts.txt" 2>&1 &
wait
echo "tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|differs|rel " | head -30 | cut -c1-220
gemms() {  # WHO PRESET SCHEME "M ..."
  # shellcheck disable=SC2086
  MOEQ_DIAG_WS=$([ "$1" = O ] && echo 64 || echo 0) timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 \
    --preset "$2" --scheme "$3" -M $4 --tuning "$root/tuning/sm_90/${2}_${3}.json" >"$out/o.tmp" 2>&1
  grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$1" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
}
for who in O N N O; do
  gemms "$who" gpt-oss-120b mxfp4 "1024 2048 4096"
  gemms "$who" qwen3-30b-a3b mxfp4 "1024 4096"
  gemms "$who" qwen3-30b-a3b int4-g128 "1024 4096"
  gemms "$who" qwen3-30b-a3b fp8-block "4096"
  echo "gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; print k, $1, $6}' "$out/gemms.txt" | sort -k1,4 -k5 | awk '{k=$1" "$2" "$3" "$4; if (k!=p) {printf "\n%s:", k; p=k} printf " %s=%s", $5, $6}'
echo
for v in 127 63; do
  MOEQ_DIAG_WS=$v timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 \
    -M 1024 --tile 48x256/1x8x1/6/p/s >"$out/o.tmp" 2>&1
  grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="skeleton$v" '{print s, $1, $2, $4, $5}'
done
for who in O N N O; do
  [ $(($(date +%s) - t0)) -gt 480 ] && { echo "skipped steps $who: no time left"; continue; }
  MOEQ_DIAG_WS=$([ "$who" = O ] && echo 64 || echo 0) timeout 80 "$build/moeq" bench --trials 5 --kernel layer \
    --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 -M 1024 2048 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  echo "steps $who $(($(date +%s) - t0)) s"
done
[ -f "$out/steps.txt" ] && sort -k2,2 -k4,4n -k1,1 "$out/steps.txt"
echo "done $(($(date +%s) - t0)) s"
