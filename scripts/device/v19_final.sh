#!/usr/bin/env bash
# Session 18, last call: the planner's alternative tiles where they run fewer waves (GEMM v19) as
# landed. Every GPU test (MoeGemmGpu on the planner's 8-row direct tiles, MXFP4's 64-channel tile
# among them), `moeq verify`, the warm-up test; then GEMM1 and GEMM2 against the tree before
# (BINS/moeq_base) in the same call: every preset at the M where the planner now picks otherwise,
# and some where it does not.
# Usage: v19_final.sh BUILD BINS PART   (env OUT; PART proof: the tests and Qwen3's first round; PART
# timing: ExpertsGpu and `moeq verify` again (the planner changed between the calls), the other
# presets and Qwen3's second round; one device call each)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
part="$3"
for b in "$build/moeq" "$bins/moeq_base"; do for p in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do
  for s in int4-g128 mxfp4; do echo "$b compile --arch sm_90a --preset $p --scheme $s"; done
done; done | xargs -P 16 -I{} sh -c "{} 2>&1 | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
if [ "$part" = proof ]; then
  gpu_tests "8x128/1x4x1/4/o4/r 8x32/1x1x4/4/o4/r 8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r 8x256/1x4x1/2/r" '*' 280
  timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(tail -1 "$out/verify.txt")"
  timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
  echo "warmup rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/warmup.txt")"
fi
ab() {  # ab ROUND PRESET SCHEME M...
  local round="$1" preset="$2" scheme="$3"
  shift 3
  for which in base new; do
    moeq="$build/moeq"; [ $which = base ] && moeq="$bins/moeq_base"
    timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" -M "$@" \
      >>"$out/$which$round.txt" 2>&1
  done
  echo "bench $round $preset $scheme $(($(date +%s) - t0)) s"
}
if [ "$part" = proof ]; then
  ab 1 qwen3-30b-a3b int4-g128 4 6 8 12 14 16 24 32 48 64
  ab 1 qwen3-30b-a3b mxfp4 8 10 16 24 32 48 64
else
  gpu_tests "8x128/1x4x1/2/r" 'ExpertsGpu.*' 150
  timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(tail -1 "$out/verify.txt")"
  ab 1 gpt-oss-120b int4-g128 8 16 32
  ab 1 gpt-oss-120b mxfp4 4 8 16 32
  ab 1 deepseek-v3 int4-g128 3 4 8 16
  ab 1 deepseek-v3 mxfp4 6 16
  ab 2 qwen3-30b-a3b int4-g128 4 6 8 12 14 16 24 32 48 64
  ab 2 qwen3-30b-a3b mxfp4 8 10 16 24 32 48 64
fi
echo "done $(($(date +%s) - t0)) s"
