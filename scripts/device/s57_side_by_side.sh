#!/usr/bin/env bash
# Issue 6's side by side on session 56's code (the warp-specialized GEMM1 applies the activation in its epilogue;
# the logistic on the SFU), MXFP4 W4A16 on the issue's two layers, in two calls on one warm machine.
# Part `moeq`: GEMM1 / GEMM2 and whole steps of gpt-oss-120b and Qwen3-30B-A3B MXFP4 (shipped tables), the guide's
#   bar (Qwen3-30B-A3B INT4-g128 GEMM1 / GEMM2) and cuBLAS bf16 on Qwen3's GEMM1 shape. Copy bandwidth is in every
#   `moeq bench` header.
# Part `humming`: Humming 0.1.20's GEMMs and whole steps on the same layers and M (.cache-device/wheels carried).
# Prediction (session 56's estimate, across machines): gpt-oss-120b steps ~1.01 / ~1.00 of Humming's less its align
# at M = 640 / 1024 (1.035 / 1.022 in session 54); GEMM2 at 640 still ~1.09 (unchanged kernel).
# Usage: s57_side_by_side.sh moeq|humming BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
qwen_m="1 16 64 256 1024 4096"
oss_m="1 16 64 256 640 1024"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$part" = moeq ]; then
  {
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset gpt-oss-120b --scheme mxfp4 -M $oss_m
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme mxfp4 int4-g128 \
      -M $qwen_m
  } >"$out/moeq_gemm.txt" 2>&1
  echo "gemms rc=$? $(($(date +%s) - t0)) s"
  # shellcheck disable=SC2086
  timeout 100 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b --tokens $qwen_m >"$out/cublas.txt" 2>&1
  echo "cublas rc=$? $(($(date +%s) - t0)) s"
  {
    # shellcheck disable=SC2086
    timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M $oss_m
    # shellcheck disable=SC2086
    timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 -M $qwen_m
  } >"$out/moeq_layer.txt" 2>&1
  echo "layers rc=$? $(($(date +%s) - t0)) s"
else
  mkdir -p "$out/h"
  humming() {  # humming NAME SECONDS humming_moe.py-ARGS...
    local name="$1" seconds="$2"
    shift 2
    HUMMING_TIMEOUT="$seconds" OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" "$@" >/dev/null 2>&1
    echo "humming $name rc=$? $(($(date +%s) - t0)) s"
    mv "$out/h/humming.txt" "$out/humming_$name.txt"
  }
  # NOTE: one run per layer, each on moeq's M of that layer (one run over both lists would time M that moeq does not).
  # shellcheck disable=SC2086
  humming gemm_gpt_oss 90 --preset gpt-oss-120b --scheme mxfp4 --tokens $oss_m
  # shellcheck disable=SC2086
  humming gemm_qwen3 90 --preset qwen3-30b-a3b --scheme mxfp4 --tokens $qwen_m
  # shellcheck disable=SC2086
  humming layer_gpt_oss 170 --layer --preset gpt-oss-120b --scheme mxfp4 --tokens $oss_m
  # shellcheck disable=SC2086
  humming layer_qwen3 200 --layer --preset qwen3-30b-a3b --scheme mxfp4 --tokens $qwen_m
  rmdir "$out/h" 2>/dev/null
  tail -4 "$out"/humming_*.txt
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
