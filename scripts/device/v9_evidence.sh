#!/usr/bin/env bash
# Device evidence for the 8-bit 8-row copy-warp planner change (session 9, call C of
# bench/results/2026-12-01-h200-gemm-v9.md), in one device call: warm-up of the kernel cache, the GPU
# tests on the copy-warp and few-rows tiles, `moeq verify`, the warm-up test, then every 8-bit
# scheme's GEMM1 and GEMM2 at M = 16, 32, 64 (Qwen3-30B-A3B) and FP8-block on DeepSeek-V3, a
# baseline `moeq` and this build's in turn (gemm_compare.sh).
# Usage: v9_evidence.sh BASE_MOEQ BUILD   (BUILD holds moeq, moeq_gpu_tests, moeq_gpu_warmup_test; env OUT)
. "$(dirname "$0")/evidence_lib.sh"
evidence_setup "$1" "$2"
(
  for s in fp8-block fp8-channel mxfp8 int8-ch; do "$base" compile --arch sm_90a --preset qwen3-30b-a3b --scheme $s | tail -1; done
  "$base" compile --arch sm_90a --preset deepseek-v3 --scheme fp8-block | tail -1
) >"$out/warm_base.txt" 2>&1 &
evidence_correctness "8x128/1x8x1/4/p 8x128/1x4x1/4/p 16x64/1x4x1/6/p 8x32/1x1x4/16"
# Speed: gemm_compare.sh runs the base then this build per scheme, and cuBLAS bf16 of each shape.
OUT="$out" TOKENS="16 32 64" KERNELS="gemm1 gemm2" timeout 300 "$(dirname "$0")/gemm_compare.sh" "$base" "$build" \
  qwen3-30b-a3b fp8-block fp8-channel mxfp8 int8-ch
OUT="$out" TOKENS="16 32 64" KERNELS="gemm1 gemm2" timeout 200 "$(dirname "$0")/gemm_compare.sh" "$base" "$build" \
  deepseek-v3 fp8-block
grep -E "^gemm|^==" "$out/cmp_qwen3-30b-a3b.txt" "$out/cmp_deepseek-v3.txt"
echo "end $(($(date +%s) - t0)) s"
