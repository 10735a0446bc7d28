#!/usr/bin/env bash
# Session 13, calls F and G: INT4 on the accumulators with biased codes (DequantPath::kBiased: the A
# fragments hold code + 128; MMAs with A = -(128 + zp) add the offsets times the tokens). MoeGemmGpu
# on TEST_TILES for every scheme, `moeq verify` (VERIFY=1), then INT4 GEMMs on Qwen3-30B-A3B (two
# rounds) and DeepSeek-V3 (one): through the planner, or on BENCH_TILES where given. Compared with
# call E of bench/results/2026-12-01-h200-gemm-v14.md (the same tiles before the change).
# Call F: defaults. Call G: TEST_TILES=8x128/1x4x1/2/r VERIFY=0 M="16 64"
#   BENCH_TILES="8x128/1x4x1/2/r 8x128/1x4x1/2/o5/r".
# Usage: v14_biased.sh MOEQ_BUILD   (env OUT, TEST_TILES, VERIFY, M, BENCH_TILES)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
test_tiles="${TEST_TILES:-8x128/1x4x1/2/r 8x64/1x2x2/2/r 16x128/1x4x1/4}"
ms="${M:-1 2 4 16 64 256}"
tile_args=()
[ -n "${BENCH_TILES:-}" ] && read -r -a tile_args <<<"--tile $BENCH_TILES"
warm_tiles "int4-g128 mxfp4 nvfp4 mxfp8 fp8-channel fp8-block int8-ch int8-g64 int4-g32-zp int4-g64-zp mxfp4:f16 int4-g128:f16" \
  "$test_tiles ${BENCH_TILES:-}"
MOEQ_TEST_TILES="$test_tiles" timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.*' >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$out/gpu_tests.txt" | head
if [ "${VERIFY:-1}" = 1 ]; then
  timeout 150 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(tail -1 "$out/verify.txt") $(($(date +%s) - t0)) s"
fi
bench() { timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 "$@" "${tile_args[@]}" >>"$out/bench.txt" 2>&1; }
for round in 1 2; do
  # shellcheck disable=SC2086
  bench --preset qwen3-30b-a3b --scheme int4-g128 -M $ms
done
bench --preset deepseek-v3 --scheme int4-g128 -M 16
echo "bench done $(($(date +%s) - t0)) s"
