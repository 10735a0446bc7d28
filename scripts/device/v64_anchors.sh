#!/usr/bin/env bash
# Issue 6's side by side after sessions 21-29, kernels: `moeq bench --kernel gemm1 gemm2` with each layer's
# shipped tuning table (the tiles `Experts::apply` runs), cuBLAS bf16 and Humming's MoE GEMMs, one call.
# Humming's NVRTC cache comes back as humming_cache.txz for the layer call.
# Usage: v64_anchors.sh BUILD "TOKENS"   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tokens=($2)
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for pair in "qwen3-30b-a3b mxfp4" "gpt-oss-120b mxfp4" "qwen3-30b-a3b int4-g128"; do
  set -- $pair
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$1" --scheme "$2" -M "${tokens[@]}" \
    --tuning "$root/tuning/sm_90/$1_$2.json" >>"$out/moeq_bench.txt" 2>&1
  echo "moeq $pair rc=$? $(($(date +%s) - t0)) s"
done
timeout 100 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b gpt-oss-120b --tokens "${tokens[@]}" \
  >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
for pair in "qwen3-30b-a3b mxfp4" "gpt-oss-120b mxfp4" "qwen3-30b-a3b int4-g128"; do
  set -- $pair
  left=$((540 - ($(date +%s) - t0)))
  [ "$left" -lt 30 ] && break
  mkdir -p "$out/humming_$1_$2"
  HUMMING_TIMEOUT=$left OUT="$out/humming_$1_$2" bash "$root/scripts/device/humming_anchor.sh" --preset "$1" --scheme "$2" \
    --tokens "${tokens[@]}" >"$out/humming_$1_$2/log.txt" 2>&1
  echo "humming $pair rc=$? $(($(date +%s) - t0)) s"
done
tar cJf "$out/humming_cache.txz" -C /tmp humming-cache 2>/dev/null
ls -la "$out/humming_cache.txz"
