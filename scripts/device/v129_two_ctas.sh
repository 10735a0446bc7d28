#!/usr/bin/env bash
# Session 41's plan for the next device call (written with no machine lent). (1) GPU tests: the candidate test on the
# 16-32-token `/p/t` tiles of session 40 and their two-CTAs-an-SM forms (`/o2`, setmaxnreg 32 / 104 on 80 registers at
# launch; ptxas here: no spills at 128 channels, 40-44 bytes at 256), then the experts tests that run the planner's
# `/t` tiles. (2) GEMMs at ~16 rows per expert (Qwen3 M = 256, gpt-oss-120b M = 512, Qwen3 INT4 M = 256) and ~24
# (Qwen3 M = 384): the planner's tile, session 40's one-CTA `/p/t` tiles and the `/o2` ones, in one run each.
# Kernels packed here (scripts/device/pack_cache.sh with the lines in the header of this file's patch notes).
# Usage: v129_two_ctas.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
two="16x128/1x8x1/8/o2/p/t 24x128/1x8x1/4/o2/p/t 24x128/1x8x1/8/o2/p/t 32x128/1x8x1/8/o2/p/t 24x256/1x8x1/4/o2/p/t"
# The same shapes on one CTA an SM: the A/B that credits a gain to the second CTA.
one="24x128/1x8x1/8/p/t 24x256/1x8x1/4/p/t 24x256/1x8x1/8/p/t 24x512/1x8x1/8/p/t 32x512/1x8x1/8/p/t"
MOEQ_TEST_TILES="$two $one" timeout 200 "$build/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.EveryTile*' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|rel " "$out/gpu_tests.txt" | head -30
for case in "qwen3-30b-a3b mxfp4 256" "gpt-oss-120b mxfp4 512" "qwen3-30b-a3b int4-g128 256" "qwen3-30b-a3b mxfp4 384"; do
  set -- $case
  tiles="$two $one"
  [ $2 = int4-g128 ] && tiles="$two 24x128/1x8x1/8/p/t 24x256/1x8x1/4/p/t 24x256/1x8x1/8/p/t"
  timeout 60 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --trials 9 >>"$out/gemms.txt" 2>&1
  timeout 120 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --tile $tiles --trials 9 \
    >>"$out/gemms.txt" 2>&1
  timeout 60 "$build/moeq" bench --kernel gemm1 gemm2 --preset $1 --scheme $2 -M $3 --trials 9 >>"$out/gemms.txt" 2>&1
  echo "gemms $case rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^gemm|^copy" "$out/gemms.txt"
# NOTE: a candidate-test timeout with no FAILED line is what a setmaxnreg hang would look like (the jit test
# MoeGemmJit.TwoCtaProducerTilesStartOn80Registers pins the 80 registers at launch that rule it out).
