#!/usr/bin/env bash
# Session 15, call E: the planner with INT4's grouped 4-deep ring (GEMM v16). Every GPU test (MoeGemmGpu on
# the planner's direct tiles), `moeq verify`, the warm-up test; then INT4's planner GEMMs against the tree
# before (BASE_BUILD) in the same call: Qwen3-30B-A3B two rounds, gpt-oss-120b and DeepSeek-V3 one.
# Usage: v16_final.sh BUILD BASE_BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
base_build="$2"
(build="$base_build"; out="${OUT:-/tmp/moeq-out}"; export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
 t0=$(date +%s); warm_tiles "int4-g128" "8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r" "qwen3-30b-a3b") &
evidence_setup "$1" "$1"
evidence_correctness "8x128/1x4x1/4/o4/r 8x32/1x1x4/4/o4/r 8x128/1x4x1/2/r 8x64/1x2x2/2/r 8x32/1x1x4/2/r"
ab() {  # ab ROUND PRESET M...
  local round="$1" preset="$2"; shift 2
  for which in base new; do
    moeq="$build/moeq"; [ $which = base ] && moeq="$base_build/moeq"
    timeout 100 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme int4-g128 -M "$@" \
      >>"$out/$which$round.txt" 2>&1
  done
  echo "bench $round $preset $(($(date +%s) - t0)) s"
}
ab 1 qwen3-30b-a3b 1 4 8 10 16 32 64 256
ab 2 qwen3-30b-a3b 1 4 8 10 16 32 64 256
ab 1 gpt-oss-120b 1 16 64
ab 1 deepseek-v3 16
echo "done $(($(date +%s) - t0)) s"
