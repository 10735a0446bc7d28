#!/usr/bin/env bash
# Session 29, call A (correctness): the kernels with programmatic dependent launch (every kernel waits
# for the one before it first) and the routing's ballot grouping: the check of persistent CTAs that loop
# over many tiles on the tiles the tables would ship, every other GPU test, the warm-up test; then the
# routing alone, warp_peers against BUILD/moeq_base (__match_any_sync), both without the attribute
# (MOEQ_PDL=0), alternating.
# Usage: v61_pdl_tests.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
MOEQ_TEST_TILES="80x256/1x8x1/6/p/s 144x256/1x8x1/3/p/s 64x256/1x8x1/8/p/s" timeout 150 "$build/moeq_gpu_tests" \
  --gtest_filter='MoeGemmGpu.PersistentTiles*' >"$out/persistent.txt" 2>&1
echo "persistent rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |Failure|differs|^\[       OK" "$out/persistent.txt" | tail -4
gpu_tests "80x256/1x8x1/6/p 144x256/1x8x1/4/p 24x128/1x4x1/4/r 8x128/1x4x1/4/o4/r" '-MoeGemmGpu.PersistentTiles*' 320
grep -E "^\[       OK|^\[  FAILED" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 3000; echo
timeout 40 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
for round in 1 2; do
  for binary in moeq moeq_base moeq_base moeq; do
    MOEQ_PDL=0 timeout 30 "$build/$binary" bench --trials 7 --kernel align --preset qwen3-30b-a3b gpt-oss-120b \
      -M 16 256 1024 4096 >>"$out/align_$binary.txt" 2>&1
  done
  echo "align round $round rc=$? $(($(date +%s) - t0)) s"
done
for binary in moeq moeq_base; do echo "$binary:"; grep -E "^align " "$out/align_$binary.txt" | head -16; done
find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | tar cJf "$out/new_cubins.txz" -T - 2>/dev/null
ls -la "$out/new_cubins.txz"
