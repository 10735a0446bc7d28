#!/usr/bin/env bash
# Where the e4m3 warp-specialized tile's time goes (Qwen3 MXFP4 x FP8 per token, M = 4096, canonical
# codes): ncu's GEMM times of the kernel as built and of three broken variants (wrong results, for
# timing only), each built from a patched header on the workstation: no token permute, a quarter of
# the token copies, no e2m1 -> e4m3 decode.
# Usage: v36_e4m3_bottleneck.sh BUILD   (BUILD holds moeq, moeq_nopermute, moeq_fewcopies, moeq_nodecode)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for variant in moeq moeq_nopermute moeq_fewcopies moeq_nodecode; do
  "$build/$variant" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --codes canonical -M 4096 >/dev/null 2>&1
  f="$out/ncu-$variant.txt"
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \
    -k moeq_moe_gemm "$build/$variant" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --codes canonical -M 4096 >"$f" 2>&1
  echo "$variant rc=$? $(($(date +%s) - t0)) s: $(awk '/gpu__time_duration.sum|gmma_cycles/{print $NF}' "$f" | paste -sd' ')"
done
