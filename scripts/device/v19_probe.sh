#!/usr/bin/env bash
# Session 18, call 2: where MXFP4's direct tile waits (ncu source pages of main and of the pass-of-2
# patch), the 64-channel MXFP4 tile against the planner's over M and shapes, and INT4's 2-deep / 4-deep
# boundary at M = 6-16.
# Usage: v19_probe.sh BINS   (BINS/moeq_base, BINS/moeq_mx; env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$1"
tiles_mx="8x128/1x4x1/2/r 8x256/1x4x1/2/r"
tiles_int4="8x128/1x4x1/2/r 8x128/1x4x1/4/o4/r"
for p in qwen3-30b-a3b gpt-oss-120b; do for t in $tiles_mx; do
  echo "--preset $p --scheme mxfp4 --tile $t"; done; done >/tmp/warm_list.txt
for t in $tiles_int4; do echo "--preset qwen3-30b-a3b --scheme int4-g128 --tile $t"; done >>/tmp/warm_list.txt
xargs -P 16 -L 1 sh -c "\"$bins/moeq_base\" compile --arch sm_90a \$0 \"\$@\" | tail -1" </tmp/warm_list.txt >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
for round in 1 2; do
  timeout 100 "$bins/moeq_base" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 \
    -M 12 16 24 32 48 64 --tile $tiles_mx >>"$out/sweep_r$round.txt" 2>&1
  timeout 100 "$bins/moeq_base" bench --trials 5 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 \
    -M 16 32 64 --tile $tiles_mx >>"$out/sweep_r$round.txt" 2>&1
  timeout 100 "$bins/moeq_base" bench --trials 5 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 \
    -M 6 8 10 12 14 16 --tile $tiles_int4 >>"$out/sweep_r$round.txt" 2>&1
  echo "sweep $round $(($(date +%s) - t0)) s"
done
SASS=1 OUT=/tmp/ncu/base bash "$(dirname "$0")/ncu_gemm.sh" "$bins/moeq_base" "qwen3-30b-a3b mxfp4 64 gemm1" \
  "qwen3-30b-a3b mxfp4 16 gemm1"
echo "ncu base $(($(date +%s) - t0)) s"
SASS=1 OUT=/tmp/ncu/mx bash "$(dirname "$0")/ncu_gemm.sh" "$bins/moeq_mx" "qwen3-30b-a3b mxfp4 64 gemm1"
tar -C /tmp -czf "$out/ncu.tgz" ncu
echo "done $(($(date +%s) - t0)) s"
