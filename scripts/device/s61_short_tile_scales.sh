#!/usr/bin/env bash
# docs/experiments/2026-12-06-short-tile-grouped-scales.patch (session 60): on warp-specialized tiles of at most 48
# rows, INT4 and FP8-block scales take the grouped ring that MX and NVFP4 scales already take (session 34). Offline:
# the Qwen3-30B-A3B INT4-g128 24x256/1x8x1/4/o2/p/t consumer span went from 676 to 651 instructions, and from 12 LDG
# to 8, with no spill.
# Why: on the H200 (session 59) INT4 GEMM1 at Qwen3 M = 256 took 91.0 us on that tile, against 87.6 for MXFP4 and 74.1
# for Humming's INT4. INT4's consumers issue fewer instructions than MXFP4's, but each tile's decode waits for every
# scale load in flight (one scoreboard).
# Prediction: Qwen3 INT4 GEMMs at M = 256-640 (24- and 48-row tiles) -2 to -6%. DeepSeek-V3 FP8-block M = 1024 (48 rows)
# -1 to -4%. M = 4096 (larger tiles, not changed) even.
# Parts (one device call each):
#   check (~200 s): the tests that reach these tiles, on the patched build: every scheme of the candidate test on the
#     short tiles (MOEQ_TEST_TILES), the persistent and MMA-order tests (bit for bit against other tiles), the layer
#     oracle; then `moeq verify` of both layers.
#   time (~250 s): Qwen3 INT4 GEMMs on the shipped tiles, P (patched) and M (main) in the order M P P M, then whole
#     steps in the same order.
#   deepseek (~450 s): the same for DeepSeek-V3 FP8-block at M = 1024.
# Each process times a small M first (M = 64): the first case a process times runs slow.
# Land the patch if the tests pass, the GEMMs gain at M = 256, and no step loses beyond its spread.
# Carry .cache-device-s61-grouped.txz (patched binaries and kernels) and .cache-device-s60-retune.txz (main's), then:
#   mkdir -p .cache-device && rm -rf .cache-device/v2 .cache-device/bin .cache-device/bin-main &&
#   tar xJf .cache-device-s60-retune.txz -C .cache-device && mv .cache-device/bin .cache-device/bin-main &&
#   tar xJf .cache-device-s61-grouped.txz -C .cache-device && OUT=$OUT MOEQ_CACHE_DIR=$PWD/.cache-device \
#   bash scripts/device/s61_short_tile_scales.sh check .cache-device/bin .cache-device/bin-main
# Usage: s61_short_tile_scales.sh check|time|deepseek PATCHED_BIN [MAIN_BIN]   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
patched="$2" main="${3:-}"
case "$part" in check | time | deepseek) ;; *) echo "unknown part: $part" >&2; exit 2 ;; esac
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$part" = check ]; then
  # Warp-specialized tiles of at most 48 rows with an even ring: those the shipped tables run, and their twins without
  # `/t` (the candidate test runs `/t` tiles only at K % 64 == 0: INT4-g128 and -g64 there, FP8-block on the twins) and
  # without `/s` (the persistent test's 48-row tile).
  export MOEQ_TEST_TILES="24x256/1x8x1/4/o2/p/t 32x128/1x8x1/8/o2/p/t 48x256/1x8x1/6/p/t 48x256/1x8x1/8/p/t \
48x256/1x8x1/6/p/s/t 48x256/1x8x1/6/p 48x256/1x8x1/8/p 48x256/1x8x1/4/p 48x256/1x8x1/6/p/s"
  filtered_gpu_tests 'MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct:MoeGemmGpu.PersistentTilesEqualOneTilePerCta:MoeGemmGpu.MmaOrderTokensEqualTheirPermutedTile:MoeGemmGpu.Fp8BlockLargeScalesTakeTheUnfoldedPath:ExpertsGpu.EveryFormatEveryLayoutMatchesOracle' 300
  unset MOEQ_TEST_TILES
  timeout 100 "$patched/moeq" verify --preset qwen3-30b-a3b --scheme int4-g128 --activation silu -M 256 640 \
    --layout indexed contiguous >"$out/verify.txt" 2>&1
  echo "verify qwen3 rc=$? $(($(date +%s) - t0)) s"
  # M = 600: rows (4096, 8192], the 48-row tile of M = 1024 at less verification time.
  timeout 150 "$patched/moeq" verify --preset deepseek-v3 --scheme fp8-block --activation silu -M 600 \
    --layout indexed >>"$out/verify.txt" 2>&1
  echo "verify deepseek rc=$? $(($(date +%s) - t0)) s"
  grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
  echo "done $(($(date +%s) - t0)) s"
  exit 0
fi
# run WHO KERNELS PRESET SCHEME M...: one `moeq bench` process (WHO: M main, P patched), its rows appended to
# runs.txt, each after WHO.
run() {
  local who="$1" kernels="$2" preset="$3" scheme="$4" bin="$patched"
  shift 4
  [ "$who" = M ] && bin="$main"
  # shellcheck disable=SC2086,SC2068
  timeout 150 "$bin/moeq" bench --trials 5 --kernel $kernels --preset "$preset" --scheme "$scheme" -M $@ >"$out/o.tmp" 2>&1
  grep -E '^(gemm1|gemm2|layer)  [a-z]' "$out/o.tmp" | grep -v ' preset ' | sed "s/^/$who /" >>"$out/runs.txt"
  grep -E "^copy" "$out/o.tmp" | head -1
}
[ -n "$main" ] || { echo "time and deepseek need MAIN_BIN" >&2; exit 2; }
if [ "$part" = time ]; then
  for who in M P P M; do
    run "$who" "gemm1 gemm2" qwen3-30b-a3b int4-g128 64 256 512 640
    echo "gemms $who $(($(date +%s) - t0)) s"
  done
  for who in M P P M; do
    run "$who" layer qwen3-30b-a3b int4-g128 64 256 512 640 4096
    echo "steps $who $(($(date +%s) - t0)) s"
  done
else
  for who in M P P M; do
    run "$who" "gemm1 gemm2" deepseek-v3 fp8-block 64 1024
    run "$who" layer deepseek-v3 fp8-block 64 1024
    echo "deepseek $who $(($(date +%s) - t0)) s"
  done
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
