#!/usr/bin/env bash
# Session 39, call 9: the README's bar after `/t`: Qwen3-30B-A3B INT4-g128 GEMM1 (and GEMM2) at M = 1, 16, 64, 256, 4096
# on the shipped table's tiles, three rounds (M = 4096 meets the 700 W cap: the spread), and cuBLAS bf16 in the same call.
# Usage: v120_bar.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for round in 1 2 3; do
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b --scheme int4-g128 \
    -M 1 16 64 256 4096 --tuning "$root/tuning/sm_90/qwen3-30b-a3b_int4-g128.json" >>"$out/bench.txt" 2>&1
  echo "round $round rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^copy|^gemm[12] " "$out/bench.txt" | cut -c1-150
timeout 90 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b --tokens 1 16 64 256 4096 >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
tail -n 12 "$out/cublas.txt"
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
