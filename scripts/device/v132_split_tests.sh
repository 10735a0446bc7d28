#!/usr/bin/env bash
# Session 42's first device call: the kernel cache warmed on 16 cores (scripts/device/warm_parallel.sh), then
# every GPU test, the warm-up test and `moeq verify` of the split headers, within DEADLINE seconds of the start.
# A second call on the still-warm machine passes the tests already done as GTEST_SKIP_DONE (a gtest negative filter);
# GTEST_ONLY (a gtest filter) runs just those suites, after the warm-up all the same.
# Usage: v132_split_tests.sh BUILD [DEADLINE]   (env OUT; MOEQ_CACHE_DIR defaults to ./.cache-device)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
deadline=$((t0 + ${2:-560}))
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv >"$out/device.txt" 2>&1
"$build/moeq" cache info
if [ -z "${GTEST_SKIP_DONE:-}" ] || [ -n "${GTEST_ONLY:-}" ]; then
  timeout $((deadline - $(date +%s) - 200)) "$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
  "$build/moeq" cache info
fi
left=$((deadline - $(date +%s) - 60))
timeout "$left" "$build/moeq_gpu_tests" --gtest_filter="${GTEST_ONLY:-*}${GTEST_SKIP_DONE:+-$GTEST_SKIP_DONE}" >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[  PASSED|tests ran" "$out/gpu_tests.txt" | head -20
grep -cE "^\[       OK" "$out/gpu_tests.txt"
timeout 40 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[  PASSED|^\[       OK" "$out/warmup.txt"
