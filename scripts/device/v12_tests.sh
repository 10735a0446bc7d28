#!/usr/bin/env bash
# Session 11, call F: the correctness evidence of the final build: kernel cache warmed on every core,
# every GPU test (MoeGemmGpu on the warp-specialized wgmma tiles and the planner's small tiles, every
# scheme), `moeq verify`, the warm-up test.
# Usage: v12_tests.sh BUILD   (BUILD holds moeq, moeq_gpu_tests, moeq_gpu_warmup_test; env OUT)
. "$(dirname "$0")/evidence_lib.sh"
evidence_setup "$1/moeq" "$1"
evidence_correctness "128x256/1x8x1/4/p 128x256/1x8x1/5/p 64x256/1x8x1/8/p 8x128/1x4x1/4/p 8x128/1x8x1/4/p 16x64/1x4x1/6/p"
echo "end $(($(date +%s) - t0)) s"
