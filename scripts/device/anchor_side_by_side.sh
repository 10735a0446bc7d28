#!/usr/bin/env bash
# One device call, side by side on the same GPU: `moeq bench` (GEMM1 and GEMM2), cuBLAS bf16 and
# Humming's MoE GEMMs (bench/anchors/humming_moe.py) on the same presets, schemes and M.
# Usage: anchor_side_by_side.sh BUILD "PRESETS" "SCHEMES" "TOKENS"   (env OUT, HUMMING_TIMEOUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
presets=($2) schemes=($3) tokens=($4)
root="$(cd "$(dirname "$0")/../.." && pwd)"
warm_layers "${presets[*]}" "${schemes[*]}"
timeout 200 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "${presets[@]}" --scheme "${schemes[@]}" \
  -M "${tokens[@]}" >"$out/moeq_bench.txt" 2>&1
echo "moeq bench rc=$? $(($(date +%s) - t0)) s"
timeout 100 python3 "$root/bench/anchors/cublas_bf16.py" --preset "${presets[@]}" --tokens "${tokens[@]}" \
  >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
OUT="$out" bash "$root/scripts/device/humming_anchor.sh" --preset "${presets[@]}" --scheme "${schemes[@]}" \
  --tokens "${tokens[@]}" >"$out/humming_log.txt" 2>&1
echo "humming rc=$? $(($(date +%s) - t0)) s"
tail -5 "$out/humming_log.txt"
