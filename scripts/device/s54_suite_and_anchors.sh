#!/usr/bin/env bash
# Session 54: issue 6's gpt-oss-120b side by side on this code, a candidate table row, and the whole GPU suite, in
# three calls on one warm machine (the kernel cache warmed in the first stays for the others; carry nothing after it).
# Part `anchors`: moeq's MXFP4 GEMMs and steps of gpt-oss-120b at M = 256 / 640 / 1024 (shipped table); steps of the
#   shipped table against scripts/device/tables/s54_gpt_oss_32x512_persistent.json at M = 576-768 (S C C S) and
#   `moeq verify` of the candidate; Humming's GEMMs and steps on the same M; then warm_parallel.sh until DEADLINE.
# Part `moegemm`: the rest of the warm-up, then every GPU suite but ExpertsGpu.
# Part `experts`: ExpertsGpu.* and the warm-up test.
# Usage: s54_suite_and_anchors.sh anchors|moegemm|experts BUILD [DEADLINE]   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
deadline=$((t0 + ${3:-570}))
root="$(cd "$(dirname "$0")/../.." && pwd)"
shipped="$root/tuning/sm_90"
candidate="$root/scripts/device/tables/s54_gpt_oss_32x512_persistent.json"
oss_m="256 640 1024"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
"$build/moeq" cache info
left() { echo $((deadline - $(date +%s))); }
warm_rest() {
  [ "$(left)" -gt 30 ] || return 0
  timeout "$(left)" "$root/scripts/device/warm_parallel.sh" "$build/moeq" 16 >>"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
  "$build/moeq" cache info
}
case "$part" in
  anchors)
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M $oss_m \
      --tuning "$shipped/gpt-oss-120b_mxfp4.json" >"$out/moeq_gemm.txt" 2>&1
    echo "gemms rc=$? $(($(date +%s) - t0)) s"
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M $oss_m \
      >"$out/moeq_layer.txt" 2>&1
    echo "layers rc=$? $(($(date +%s) - t0)) s"
    for table in shipped "$candidate" "$candidate" shipped; do
      layer_steps "$table" gpt-oss-120b mxfp4 "576 640 704 768" N
    done
    layer_verify "gpt-oss-120b mxfp4 640 704 --tuning $candidate"
    mkdir -p "$out/h"
    # shellcheck disable=SC2086
    HUMMING_TIMEOUT=120 OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" --preset gpt-oss-120b \
      --scheme mxfp4 --tokens $oss_m >/dev/null 2>&1
    echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
    mv "$out/h/humming.txt" "$out/humming_gemm.txt"
    # shellcheck disable=SC2086
    HUMMING_TIMEOUT=120 OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" --layer --preset gpt-oss-120b \
      --scheme mxfp4 --tokens $oss_m >/dev/null 2>&1
    echo "humming layers rc=$? $(($(date +%s) - t0)) s"
    mv "$out/h/humming.txt" "$out/humming_layer.txt"
    rmdir "$out/h" 2>/dev/null
    tail -3 "$out"/humming_*.txt
    warm_rest
    ;;
  moegemm)
    if [ -z "${SKIP_WARM:-}" ]; then
      warm_rest_deadline=$deadline
      deadline=$((t0 + 150))
      warm_rest
      deadline=$warm_rest_deadline
    fi
    timeout $(($(left) - 5)) "$build/moeq_gpu_tests" --gtest_filter='-ExpertsGpu.*' >"$out/gpu_tests.txt" 2>&1
    echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
    grep -E "^\[  FAILED|^\[  PASSED|tests ran" "$out/gpu_tests.txt" | head -20
    grep -cE "^\[       OK" "$out/gpu_tests.txt"
    ;;
  experts)
    timeout $(($(left) - 50)) "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.*' >"$out/gpu_tests.txt" 2>&1
    echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
    grep -E "^\[  FAILED|^\[  PASSED|tests ran" "$out/gpu_tests.txt" | head -20
    grep -cE "^\[       OK" "$out/gpu_tests.txt"
    timeout 45 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
    echo "warmup rc=$? $(($(date +%s) - t0)) s"
    grep -E "^\[  FAILED|^\[  PASSED|^\[       OK" "$out/warmup.txt"
    ;;
esac
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
