#!/usr/bin/env bash
# Session 34, call 5: issue 6's side by side after the grouped scale ring (MX / NVFP4 scales on even
# rings of the warp-specialized tiles), MXFP4 on Qwen3-30B-A3B and gpt-oss-120b at M = 1024, 2048, 4096:
# moeq's GEMMs (the shipped tables' tiles) and steps, Humming's GEMMs and steps (its NVRTC cache of session
# 30 carried in), cuBLAS bf16, one call.
# Usage: v93_anchors_ws_scales.sh BUILD HUMMING_CACHE_TXZ   (env OUT, MOEQ_CACHE_DIR; TOKENS, default
# "1024 2048 4096", and SECONDS_LEFT, default 560: the call's budget the Humming step takes what is left of)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tar xJf "$2" -C /tmp
read -r -a tokens <<<"${TOKENS:-1024 2048 4096}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for preset in gpt-oss-120b qwen3-30b-a3b; do
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$preset" --scheme mxfp4 -M "${tokens[@]}" \
    --tuning "$root/tuning/sm_90/${preset}_mxfp4.json" >>"$out/moeq_bench.txt" 2>&1
  echo "moeq gemms $preset rc=$? $(($(date +%s) - t0)) s"
done
timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 \
  -M "${tokens[0]}" "${tokens[@]}" >"$out/moeq_layer.txt" 2>&1
echo "moeq layer rc=$? $(($(date +%s) - t0)) s"
grep -E "^copy|^gemm[12] |^layer  [gq]" "$out/moeq_bench.txt" "$out/moeq_layer.txt" | cut -d: -f2- | cut -c1-110
timeout 60 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b gpt-oss-120b --tokens "${tokens[@]}" \
  >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
tail -n 12 "$out/cublas.txt"
mkdir -p "$out/humming_gemms" "$out/humming_layer"
HUMMING_TIMEOUT=200 OUT="$out/humming_gemms" bash "$root/scripts/device/humming_anchor.sh" --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens "${tokens[@]}" >"$out/humming_gemms/log.txt" 2>&1
echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
grep -E "gemm[12]" "$out/humming_gemms/humming.txt" | head -20 | cut -c1-160
left=$((${SECONDS_LEFT:-560} - ($(date +%s) - t0)))
HUMMING_TIMEOUT=$left OUT="$out/humming_layer" bash "$root/scripts/device/humming_anchor.sh" --layer --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens "${tokens[@]}" >"$out/humming_layer/log.txt" 2>&1
echo "humming layer rc=$? $(($(date +%s) - t0)) s"
tail -n 20 "$out/humming_layer/humming.txt" | cut -c1-160
echo "done $(($(date +%s) - t0)) s"
