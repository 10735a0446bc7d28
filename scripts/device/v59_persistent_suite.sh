#!/usr/bin/env bash
# Session 29, call 1: the check of persistent CTAs that loop over many tiles (bit-identical to one tile
# per CTA with 1, 3, 7 CTAs and the full grid; the shipped-table candidates first), then every other GPU
# test on the restructured warp-specialized body, the warm-up test, and, with the time left, the experts
# step with FP8 per-token activations against bf16 (issue 5's baseline), one M per process, interleaved;
# and the routing with warp_peers (ballots) against BUILD/moeq_base (__match_any_sync), alternating.
# Usage: v59_persistent_suite.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
persistent() {
  MOEQ_TEST_TILES="$1" timeout "$2" "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.PersistentTiles*' \
    >>"$out/persistent.txt" 2>&1
  echo "persistent [$1] rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |Failure|differs" "$out/persistent.txt" | tail -4
}
persistent "80x256/1x8x1/6/p/s 144x256/1x8x1/3/p/s 64x256/1x8x1/8/p/s" 150
persistent "80x256/1x8x1/5/p/s 128x256/1x8x1/3/p/s 64x256/1x8x1/6/p/s 96x256/1x8x1/4/p/s" 120
gpu_tests "80x256/1x8x1/6/p 144x256/1x8x1/4/p 24x128/1x4x1/4/r 8x128/1x4x1/4/o4/r" '-MoeGemmGpu.PersistentTiles*' 300
grep -E "^\[       OK|^\[  FAILED" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 3000; echo
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
for round in 1 2; do
  for binary in moeq moeq_base moeq_base moeq; do
    timeout 30 "$build/$binary" bench --trials 7 --kernel align --preset qwen3-30b-a3b gpt-oss-120b \
      -M 16 256 1024 4096 >>"$out/align_$binary.txt" 2>&1
  done
  echo "align round $round rc=$? $(($(date +%s) - t0)) s"
done
for binary in moeq moeq_base; do echo "$binary: $(grep -E '^align ' "$out/align_$binary.txt" | awk '{print $3 "/" $4 "=" $5}' | paste -sd' ')"; done
for m in 16 256 4096; do
  for preset_scheme in "qwen3-30b-a3b mxfp4 mxfp4:fp8-token" "deepseek-v3 fp8-block fp8-block:fp8-token"; do
    [ $(($(date +%s) - t0)) -gt 540 ] && break 2
    set -- $preset_scheme
    timeout 40 "$build/moeq" bench --trials 7 --kernel layer --preset "$1" --scheme "$2" "$3" "$2" "$3" -M "$m" \
      >>"$out/fp8_step.txt" 2>&1
    echo "step $1 M=$m rc=$? $(($(date +%s) - t0)) s"
  done
done
grep -E "^layer " "$out/fp8_step.txt" | awk '{print $2, $3, $4, $5, $6}'
# Kernels the device compiled (absent from the carried cache), to carry next time.
find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | tar czf "$out/new_cubins.tgz" -T - 2>/dev/null
ls -la "$out/new_cubins.tgz"
