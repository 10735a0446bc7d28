#!/usr/bin/env bash
# Session 50's landing check and issue 6's side by side, in two calls on one warm machine.
# Part `moeq` (BUILD = the self-routed GEMM1 with its slots < local experts rule and the re-tuned Qwen3-30B-A3B
# INT4-g128 table; OLD_BUILD = 338ac7c): GPU tests and the warm-up test; whole steps O N N O at Mixtral-8x7B M = 1-4
# (the rule turns self-routing off at M = 4) and Qwen3 INT4-g128 M = 1 and 160-640 (the table); `moeq verify` of the
# new table's rows; then the guide's bar (Qwen3 INT4-g128 GEMM1 / GEMM2 at M = 1-4096) with cuBLAS bf16, and whole
# steps of the issue's layers with the shipped tables.
# Part `humming`: Humming's GEMMs on the bar's shapes, then its whole steps on the same layers and M.
# Usage: s50_side_by_side.sh moeq|humming BUILD [OLD_BUILD]   (env OUT, MOEQ_CACHE_DIR; Humming's parts stop at 120 + 230 + 170 s)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
old_build="${3:-}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
bar_m="1 16 64 256 4096"
qwen_m="1 16 64 256 1024 4096"
oss_m="1 16 64 256 640 1024"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$part" = moeq ]; then
  self_route_gpu_tests
  layer_steps shipped mixtral-8x7b mxfp4 "1 2 4" "O N N O"
  layer_steps shipped qwen3-30b-a3b int4-g128 "1 160 320 384 640" "O N N O"
  layer_verify "qwen3-30b-a3b int4-g128 160 320 384 640"
  # shellcheck disable=SC2086
  timeout 120 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 \
    -M $bar_m >"$out/moeq_gemm.txt" 2>&1
  echo "bar gemms rc=$? $(($(date +%s) - t0)) s"
  # shellcheck disable=SC2086
  timeout 100 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b --tokens $bar_m >"$out/cublas.txt" 2>&1
  echo "cublas rc=$? $(($(date +%s) - t0)) s"
  {
    # shellcheck disable=SC2086
    timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 int4-g128 -M $qwen_m
    # shellcheck disable=SC2086
    timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M $oss_m
  } >"$out/moeq_layer.txt" 2>&1
  echo "layers rc=$? $(($(date +%s) - t0)) s"
else
  mkdir -p "$out/gemm" "$out/layer"
  # shellcheck disable=SC2086
  HUMMING_TIMEOUT=120 OUT="$out/gemm" bash "$root/scripts/device/humming_anchor.sh" --preset qwen3-30b-a3b \
    --scheme int4-g128 --tokens $bar_m >/dev/null 2>&1
  echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
  # shellcheck disable=SC2086
  HUMMING_TIMEOUT=230 OUT="$out/layer" bash "$root/scripts/device/humming_anchor.sh" --layer \
    --preset qwen3-30b-a3b --scheme int4-g128 mxfp4 --tokens $qwen_m >/dev/null 2>&1
  echo "humming qwen3 layers rc=$? $(($(date +%s) - t0)) s"
  mv "$out/layer/humming.txt" "$out/humming_layer_qwen3.txt"
  # shellcheck disable=SC2086
  HUMMING_TIMEOUT=170 OUT="$out/layer" bash "$root/scripts/device/humming_anchor.sh" --layer \
    --preset gpt-oss-120b --scheme mxfp4 --tokens $oss_m >/dev/null 2>&1
  echo "humming gpt-oss layers rc=$? $(($(date +%s) - t0)) s"
  mv "$out/layer/humming.txt" "$out/humming_layer_gpt_oss.txt"
  mv "$out/gemm/humming.txt" "$out/humming_gemm.txt"
  rmdir "$out/gemm" "$out/layer" 2>/dev/null
  tail -4 "$out"/humming_*.txt
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
