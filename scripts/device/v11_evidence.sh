#!/usr/bin/env bash
# Device evidence for session 10's changes (call E of bench/results/2026-12-01-h200-gemm-v11.md), in
# one device call: warm-up of the kernel cache, the GPU tests on the warp-specialized wgmma tiles and
# the planner's small tiles, `moeq verify`, the warm-up test, then GEMM1 and GEMM2 of the benchmarked
# schemes on Qwen3-30B-A3B and MXFP4 GEMM1 on gpt-oss-120b, a baseline `moeq` and this build's in turn
# (gemm_compare.sh, with cuBLAS bf16 of each shape).
# Usage: v11_evidence.sh BASE_MOEQ BUILD   (BUILD holds moeq, moeq_gpu_tests, moeq_gpu_warmup_test; env OUT)
. "$(dirname "$0")/evidence_lib.sh"
evidence_setup "$1" "$2"
(
  for s in int4-g128 mxfp4 fp8-block; do "$base" compile --arch sm_90a --preset qwen3-30b-a3b --scheme $s | tail -1; done
  "$base" compile --arch sm_90a --preset gpt-oss-120b --scheme mxfp4 | tail -1
) >"$out/warm_base.txt" 2>&1 &
evidence_correctness "128x256/1x8x1/4/p 128x256/1x8x1/5/p 64x256/1x8x1/8/p 8x128/1x4x1/4/p 8x128/1x8x1/4/p 16x64/1x4x1/6/p"
OUT="$out" TOKENS="16 64 1024 4096" KERNELS="gemm1 gemm2" timeout 300 "$(dirname "$0")/gemm_compare.sh" "$base" "$build" \
  qwen3-30b-a3b int4-g128 mxfp4 fp8-block
OUT="$out" TOKENS="1024 4096" KERNELS="gemm1" timeout 150 "$(dirname "$0")/gemm_compare.sh" "$base" "$build" \
  gpt-oss-120b mxfp4
grep -E "^gemm|^==" "$out/cmp_qwen3-30b-a3b.txt" "$out/cmp_gpt-oss-120b.txt" | cut -c1-140
grep -E "1024|4096" "$out"/cublas_*.txt
echo "end $(($(date +%s) - t0)) s"
