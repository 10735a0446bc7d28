#!/usr/bin/env bash
# Session 39, call 3: issue 6's side by side after the `/t` tiles (tokens in the MMA's K order) and the tables moved
# to them: MXFP4 on gpt-oss-120b and Qwen3-30B-A3B, moeq's GEMMs (the shipped tables' tiles) and steps, cuBLAS bf16,
# Humming's GEMMs and steps (compiled on this machine: no cache of it was kept), one call. Humming's cache comes back
# as humming_cache.txz for a later call.
# Usage: v114_anchors_mma_order.sh BUILD   (env OUT, MOEQ_CACHE_DIR; TOKENS, default "512 1024 2048 4096";
# SECONDS_LEFT, default 575: Humming's step takes what is left of it; humming wheels in .cache-device/wheels)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
read -r -a tokens <<<"${TOKENS:-512 1024 2048 4096}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for preset in gpt-oss-120b qwen3-30b-a3b; do
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$preset" --scheme mxfp4 -M "${tokens[@]}" \
    >>"$out/moeq_bench.txt" 2>&1
  echo "moeq gemms $preset rc=$? $(($(date +%s) - t0)) s"
done
# NOTE: the first M twice: a process's first timed layer runs slow (perf-notes, session 24).
timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 \
  -M "${tokens[0]}" "${tokens[@]}" >"$out/moeq_layer.txt" 2>&1
echo "moeq layer rc=$? $(($(date +%s) - t0)) s"
grep -E "^copy|^gemm[12] |^layer  [gq]" "$out/moeq_bench.txt" "$out/moeq_layer.txt" | cut -d: -f2- | cut -c1-110
timeout 60 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b gpt-oss-120b --tokens "${tokens[@]}" \
  >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
tail -n 12 "$out/cublas.txt"
mkdir -p "$out/humming_gemms" "$out/humming_layer"
HUMMING_TIMEOUT=260 OUT="$out/humming_gemms" bash "$root/scripts/device/humming_anchor.sh" --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens "${tokens[@]}" >"$out/humming_gemms/log.txt" 2>&1
echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
grep -E "gemm[12]" "$out/humming_gemms/humming.txt" | head -20 | cut -c1-160
left=$((${SECONDS_LEFT:-575} - ($(date +%s) - t0)))
HUMMING_TIMEOUT=$left OUT="$out/humming_layer" bash "$root/scripts/device/humming_anchor.sh" --layer --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens "${tokens[@]}" >"$out/humming_layer/log.txt" 2>&1
echo "humming layer rc=$? $(($(date +%s) - t0)) s"
tail -n 20 "$out/humming_layer/humming.txt" | cut -c1-160
tar cJf "$out/humming_cache.txz" -C /tmp humming-cache 2>/dev/null
ls -la "$out/humming_cache.txz"
echo "done $(($(date +%s) - t0)) s"
