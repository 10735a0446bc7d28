#!/usr/bin/env bash
# Issue 5, second GPU run (docs/experiments/2026-12-02-row-scales-flag.patch, tune-confirm.patch and
# fp8-mma-probe.patch applied): the row scales as a kernel flag (16-bit layers get their old epilogue
# back), each GEMM input quantized straight to its 16-bit values in one kernel (GEMM2's inside the
# activation kernel), the contiguous layout quantizing its M tokens before the permute, the
# vectorized dequantizer, `moeq tune`'s confirm rounds and --layout, the FP8 MMA probe.
# Call A (correctness): the kernels warmed, the ExpertsGpu / ElementwiseGpu / MoeGemmGpu (three
# tiles) / Fp8MmaGpu tests, `moeq verify`, the warm-up test.
# Call B (timing): GEMMs against BINS/moeq_base (1bf564f, before the run-time row-scale test: the
# 16-bit epilogue's cost should be gone) in both orders, the layers against BINS/moeq_head (fa657e5:
# quantize after the permute, four extra launches), the shipped tables against the planner on the
# session-21 tables, and a short tune in each layout.
# Usage: v24_quant_fused.sh BUILD BINS a|b   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bins="$2"
if [ "$3" = a ]; then
  "$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
  gpu_tests "8x128/1x4x1/4/o4/r 16x128/1x4x1/4 128x256/1x8x1/4/p" 'ExpertsGpu.*:ElementwiseGpu.*:MoeGemmGpu.*:Fp8MmaGpu.*' 300
  timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(tail -1 "$out/verify.txt")"
  timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
  echo "warmup rc=$?"
else
  warm_layers "qwen3-30b-a3b deepseek-v3" "mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 int4-g128"
  for round in 1 2; do
    bench_against_base "$round" qwen3-30b-a3b mxfp4 256 4096
    bench_against_base "$round" qwen3-30b-a3b int4-g128 256 4096
  done
  for p in qwen3-30b-a3b deepseek-v3; do
    for moeq in "$build/moeq" "$bins/moeq_head"; do
      timeout 90 "$moeq" bench --trials 3 --kernel layer --preset "$p" \
        --scheme mxfp4 mxfp4:fp8-token mxfp4:mxfp8 mxfp4:mxfp4 -M 16 256 4096 >>"$out/layer-$p.txt" 2>&1
      echo "layer $p $moeq rc=$? $(($(date +%s) - t0)) s"
    done
  done
  # The session-21 tables (tuned before the confirm rounds) against the planner, whole layers.
  for ps in mixtral-8x7b:int4-g128 deepseek-v3:mxfp4 gpt-oss-20b:mxfp4; do
    for shipped in "" --no-shipped-tuning; do
      # shellcheck disable=SC2086
      timeout 60 "$build/moeq" bench --trials 3 --kernel layer --preset "${ps%%:*}" --scheme "${ps#*:}" \
        -M 16 256 1024 4096 $shipped >>"$out/tables.txt" 2>&1
    done
    echo "tables $ps rc=$? $(($(date +%s) - t0)) s"
  done
  timeout 90 "$build/moeq" tune --preset qwen3-30b-a3b --scheme int4-g128 -M 16 256 4096 >"$out/tune.txt" 2>&1
  echo "tune rc=$? $(($(date +%s) - t0)) s"
  for layout in contiguous masked; do
    timeout 60 "$build/moeq" tune --preset qwen3-30b-a3b --scheme int4-g128 -M 16 4096 --layout "$layout" \
      --candidates 8x128/1x4x1/4/o4/r 16x128/1x4x1/4 128x256/1x8x1/4/p >>"$out/tune.txt" 2>&1
    echo "tune $layout rc=$? $(($(date +%s) - t0)) s"
  done
fi
echo "done $(($(date +%s) - t0)) s"
