#!/usr/bin/env bash
# Session 33, call 7: why GEMM2's fused activation-quantize takes ~7.7 us where the plain activation takes ~5.3
# (Qwen3-30B-A3B MXFP4, M = 256), and GEMM2 with row scales against without: ncu sections of each kernel,
# one launch each (the first apply's), both schemes.
# Usage: v87_actq_profile.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
sections="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
for scheme in mxfp4 mxfp4:fp8-token; do
  f="$out/ncu-act-${scheme//:/-}.txt"
  # shellcheck disable=SC2086
  timeout 90 ncu --clock-control none $sections -k regex:moeq_activation -c 1 \
    "$build/moeq" run --preset qwen3-30b-a3b --scheme "$scheme" -M 256 >"$f" 2>&1
  echo "ncu act $scheme rc=$?"
  grep -E "^  moeq_|Duration|Memory Throughput|DRAM Throughput|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Stall|Block Limit" "$f" | head -24
  f="$out/ncu-gemm2-${scheme//:/-}.txt"
  # shellcheck disable=SC2086
  timeout 90 ncu --clock-control none --section SpeedOfLight --section WarpStateStats -k regex:'moeq_moe_gemm$' -s 1 -c 1 \
    "$build/moeq" run --preset qwen3-30b-a3b --scheme "$scheme" -M 256 >"$f" 2>&1
  echo "ncu gemm2 $scheme rc=$?"
  grep -E "^  moeq_|Duration|Memory Throughput|DRAM Throughput|Warp Cycles Per Issued" "$f" | head -8
done
echo "done $(($(date +%s) - t0)) s"
