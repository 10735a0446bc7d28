#!/usr/bin/env bash
# Why the warp-specialized GEMM1 with the activation in its epilogue still runs slower than the plain GEMM1 after its
# 16-byte shared loads (session 56, call 1-2 on an H100, medians of 11 steps under ncu: gpt-oss-120b M = 1024 620.5 us
# fused against 594.0 plain, Qwen3-30B-A3B MXFP4 M = 1024 160.1 against 147.0). One GEMM1 of a `moeq run` step (the 4th
# step's; the step launches GEMM1 then GEMM2), fused (MOEQ_FUSED_ACTIVATION=1) and plain (=0), under ncu's full set:
# the details page (stall reasons, shared wavefronts, L2 / DRAM sectors, the store pattern) and the SASS source page
# with its stall samples, so the fused kernel's extra time can be placed in its epilogue's instructions.
# Usage: s56_fused_gemm1_ncu.sh MOEQ   (env OUT, MOEQ_CACHE_DIR); writes one tar, ncu_fused_gemm1.tgz
set -u
moeq="$1"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
work="$(mktemp -d)"
for preset in gpt-oss-120b qwen3-30b-a3b; do
  for fused in 1 0; do
    name="${preset}_1024_fused$fused"
    MOEQ_FUSED_ACTIVATION=$fused timeout 240 ncu --clock-control none --set full --import-source no \
      -k regex:'^moeq_moe_gemm$' --launch-skip 6 --launch-count 1 -o "$work/$name" \
      "$moeq" run --preset "$preset" --scheme mxfp4 -M 1024 >"$work/$name.log" 2>&1
    echo "ncu $name rc=$?"
    ncu --import "$work/$name.ncu-rep" --page details >"$work/$name.details.txt" 2>&1
    ncu --import "$work/$name.ncu-rep" --page source --csv --print-source sass >"$work/$name.sass.csv" 2>&1
    echo "export $name rc=$? $(wc -c <"$work/$name.sass.csv") bytes"
  done
done
rm -f "$work"/*.ncu-rep
tar czf "$out/ncu_fused_gemm1.tgz" -C "$work" .
