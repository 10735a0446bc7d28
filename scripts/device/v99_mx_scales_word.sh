#!/usr/bin/env bash
# Session 36: the folded MXFP4 multiplier decided by the caller, once per layer
# (WeightView::mx_scales_at_most_two, compiled into the warp-specialized kernels), after session 35
# showed every in-kernel decision costing more than the fold saves. Tests (the fold against the
# two-multiply kernels bit for bit, the persistent tiles through Experts::apply, a real layer against the
# reference); GEMMs alone and steps O N N O in one binary: O withholds the word
# (MOEQ_MX_SCALES_AT_MOST_TWO=0), N gives it; then Humming's GEMMs on the same shapes if time is left.
# Usage: v99_mx_scales_word.sh BUILD HUMMING_CACHE_TXZ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
timeout 200 "$build/moeq_gpu_tests" --gtest_filter=MoeGemmGpu.MxScalesAtMostTwoFoldWithTheSameValues \
  >"$out/gpu_tests_fold.txt" 2>&1 &
timeout 200 "$build/moeq_gpu_tests" --gtest_filter=ExpertsGpu.PersistentTilesMatchOracle >"$out/gpu_tests_p.txt" 2>&1 &
timeout 200 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4 -M 1024 --layout indexed contiguous \
  --codes prepared canonical >"$out/verify_qwen3.txt" 2>&1 &
wait
echo "tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|rel |differ" | head -30 | cut -c1-200
tail -n 12 "$out/verify_qwen3.txt" | cut -c1-200
for who in O N N O; do
  for spec in "gpt-oss-120b mxfp4 1024 2048 4096" "qwen3-30b-a3b mxfp4 1024 2048 4096" "gpt-oss-20b mxfp4 1024 4096" \
    "deepseek-v3 mxfp4 1024 4096"; do
    read -r preset scheme ms <<<"$spec"
    # shellcheck disable=SC2086
    run_as "$who" timeout 60 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" \
      -M $ms --tuning "$root/tuning/sm_90/${preset}_${scheme}.json" >"$out/o.tmp" 2>&1
    grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
  done
  echo "gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; s[k]+=$6; n[k]++; v[k]=v[k]" "$1":"$6} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/gemms.txt" | sort
for who in O N N O; do
  run_as "$who" timeout 100 "$build/moeq" bench --trials 5 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b \
    --scheme mxfp4 -M 1024 2048 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  run_as "$who" timeout 100 "$build/moeq" bench --trials 5 --kernel layer --preset gpt-oss-20b deepseek-v3 \
    --scheme mxfp4 -M 1024 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gd]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  echo "steps $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$1":"$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" | sort
grep -E "^copy" "$out/o.tmp" | head -2
left=$((570 - ($(date +%s) - t0)))
if [ "$left" -gt 150 ]; then
  tar xJf "$2" -C /tmp
  mkdir -p "$out/humming_gemms"
  HUMMING_TIMEOUT=$((left - 10)) OUT="$out/humming_gemms" bash "$root/scripts/device/humming_anchor.sh" \
    --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 --tokens 1024 2048 4096 >"$out/humming_gemms/log.txt" 2>&1
  echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
  grep -E "gemm[12]|copy" "$out/humming_gemms/humming.txt" | head -20 | cut -c1-160
fi
echo "done $(($(date +%s) - t0)) s"
