#!/usr/bin/env bash
# GEMM tile sweep in one device call: `moeq bench` over candidate tiles (BMxBN/WMxWNxWK/S) per
# M range, Qwen3-30B-A3B GEMM1 by default. Usage: gemm_sweep.sh BUILD [PRESET] [GEMM]
set -u
build="${1:-build}"
preset="${2:-qwen3-30b-a3b}"
gemm="${3:-gemm1}"
bench() { timeout 150 "$build/moeq" bench --kernel "$gemm" --preset "$preset" --trials 5 "$@" 2>&1 | grep -v "^$"; }
bench --tokens 1 16 --scheme int4-g128 mxfp4 fp8-block \
  --tile 16x64/1x4x1/4 16x64/1x4x2/8 16x64/1x4x4/8 16x32/1x2x4/8 16x128/1x8x2/8
bench --tokens 64 256 --scheme int4-g128 mxfp4 fp8-block \
  --tile 16x64/1x4x1/4 16x64/1x4x2/8 16x128/1x8x2/8 32x128/1x4x2/8 32x128/1x8x1/4
bench --tokens 1024 4096 --scheme int4-g128 fp8-block \
  --tile 64x128/1x8x1/4 64x128/1x8x2/4 64x128/1x4x1/4
