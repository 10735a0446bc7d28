#!/usr/bin/env bash
# Issue 6's whole side by side in two parts on one warm machine (each ~30-120 s on an H100 in session 58): every format
# the issue names on its layers. Part `moeq`: GEMM1 / GEMM2 on the tiles the steps run (`moeq bench` reads the shipped
# tables since session 58), whole steps, and cuBLAS bf16 on Qwen3's GEMM1 shape. Part `humming`: Humming 0.1.20's
# GEMMs and steps on the same layers and M (.cache-device/wheels carried). Copy bandwidth is in every `moeq bench`
# header. Layers: gpt-oss-120b MXFP4, Qwen3-30B-A3B MXFP4 and INT4-g128 (the guide's bar), DeepSeek-V3 FP8-block.
# Usage: s59_side_by_side.sh moeq|humming BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
part="$1"
device_setup "$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
# "PRESET SCHEME|M ..." per layer.
layers=("gpt-oss-120b mxfp4|1 16 64 256 640 1024" "qwen3-30b-a3b mxfp4|1 16 64 256 1024 4096"
        "qwen3-30b-a3b int4-g128|1 16 64 256 1024 4096" "deepseek-v3 fp8-block|1 16 256 1024")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for entry in "${layers[@]}"; do
  read -r preset scheme <<<"${entry%%|*}"
  m="${entry#*|}"
  name="${preset}_${scheme}"
  if [ "$part" = moeq ]; then
    # shellcheck disable=SC2086
    timeout 120 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" -M $m \
      >"$out/moeq_gemm_$name.txt" 2>&1
    echo "gemms $name rc=$? $(($(date +%s) - t0)) s"
    # shellcheck disable=SC2086
    timeout 150 "$build/moeq" bench --trials 7 --kernel layer --preset "$preset" --scheme "$scheme" -M $m \
      >"$out/moeq_layer_$name.txt" 2>&1
    echo "layers $name rc=$? $(($(date +%s) - t0)) s"
  else
    mkdir -p "$out/h"
    for what in gemm layer; do
      flag=""; [ "$what" = layer ] && flag="--layer"
      # shellcheck disable=SC2086
      HUMMING_TIMEOUT=120 OUT="$out/h" bash "$root/scripts/device/humming_anchor.sh" $flag --preset "$preset" \
        --scheme "$scheme" --tokens $m >/dev/null 2>&1
      echo "humming $what $name rc=$? $(($(date +%s) - t0)) s"
      mv "$out/h/humming.txt" "$out/humming_${what}_$name.txt"
    done
    rmdir "$out/h" 2>/dev/null
  fi
done
if [ "$part" = moeq ]; then
  timeout 100 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b --tokens 1 16 64 256 1024 4096 \
    >"$out/cublas.txt" 2>&1
  echo "cublas rc=$? $(($(date +%s) - t0)) s"
fi
# At most 8 files come back from a call: one archive.
tar czf "$out/side_by_side_$part.tgz" -C "$out" $(cd "$out" && ls ./*.txt 2>/dev/null | grep -v steps) && \
  rm -f "$out"/moeq_*.txt "$out"/humming_*.txt "$out"/cublas.txt
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
