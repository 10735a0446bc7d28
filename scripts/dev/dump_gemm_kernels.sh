#!/usr/bin/env bash
# Dumps the generated source and CUBIN of every MoE GEMM config the jit tests compile for sm_90a, of the
# tuning candidates on the tiny layer for the main weight formats, and of the layer kernels (routing,
# activation, quantizers) of the quantized-activation schemes, into OUT (a fresh cache: nothing skipped).
# Run it before and after a refactor of device or codegen code, then prove the machine code unchanged:
#   scripts/dev/compare_kernel_text.py BEFORE AFTER
# Usage: scripts/dev/dump_gemm_kernels.sh BUILD_DIR OUT [JOBS] [LINES]   (about 30 minutes on 2 cores)
#   LINES: a file of `moeq compile` argument lists, one per line (--arch sm_90a added), dumped instead of the
#   set above, for a change confined to one kernel body (e.g. scripts/dev/lists/sync_tiles.txt).
set -euo pipefail
build=$1 out=$2 jobs=${3:-0} lines=${4:-}
mkdir -p "$out/dump"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export MOEQ_CACHE_DIR=$cache MOEQ_DUMP_DIR=$out/dump
if [ -n "$lines" ]; then
  grep -Ev '^\s*(#|$)' "$lines" | while read -r line; do
    # shellcheck disable=SC2086
    "$build/moeq" compile --arch sm_90a -j "$jobs" $line | tail -1
  done > "$out/compile-lines.log" 2>&1
  echo "$(ls "$out/dump" | grep -c '\.cubin$') kernels dumped in $out/dump"
  exit 0
fi
"$build/moeq_jit_tests" --gtest_filter='MoeGemmJit.EveryConfigCompilesForSm90a' > "$out/jit.log" 2>&1
for scheme in mxfp4:bf16 int4-g128:bf16 fp8-block:bf16 mxfp8:bf16 mxfp4:fp8-token; do
  "$build/moeq" compile --preset tiny --scheme "$scheme" --arch sm_90a --tile candidates -j "$jobs" \
    > "$out/compile-${scheme/:/-}.log" 2>&1
done
for scheme in mxfp4:mxfp8 mxfp4:mxfp4 int4-g128:fp8-token; do
  "$build/moeq" compile --preset tiny --scheme "$scheme" --arch sm_90a -j "$jobs" \
    > "$out/compile-${scheme/:/-}.log" 2>&1
done
echo "$(ls "$out/dump" | grep -c '\.cubin$') kernels dumped in $out/dump"
