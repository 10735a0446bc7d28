#!/usr/bin/env bash
# GEMM speed of this build against a baseline `moeq` binary, in one device call: the same
# `moeq bench` cases run by both (interleaved per scheme, so clock drift hits both alike), plus
# the cuBLAS bf16 ceiling of the same shapes. The baseline is an older commit's `moeq`, built
# here and carried (its kernels are embedded in it); warm both into one MOEQ_CACHE_DIR first.
# Usage: gemm_compare.sh BASE_MOEQ BUILD PRESET [SCHEME...]
#   env: TOKENS (default "1 16 64 256 1024 4096"), KERNELS (default "gemm1"), OUT
# Writes $OUT/cmp_PRESET.txt (every case, base then new, under "== scheme who" headers) and
# $OUT/cublas_PRESET.txt.
set -u
base="$1"
build="$2"
preset="$3"
shift 3
schemes=("$@")
[ ${#schemes[@]} -eq 0 ] && schemes=(int4-g128 mxfp4 fp8-block)
read -r -a tokens <<<"${TOKENS:-1 16 64 256 1024 4096}"
read -r -a kernels <<<"${KERNELS:-gemm1}"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
: >"$out/cmp_$preset.txt"
for scheme in "${schemes[@]}"; do
  for who in base new; do
    bin="$base"
    [ "$who" = new ] && bin="$build/moeq"
    echo "== $scheme $who" >>"$out/cmp_$preset.txt"
    timeout 300 "$bin" bench --kernel "${kernels[@]}" --preset "$preset" --scheme "$scheme" --tokens "${tokens[@]}" \
      --trials 5 >>"$out/cmp_$preset.txt" 2>&1
    echo "bench $who $preset $scheme rc=$?"
  done
done
timeout 120 python3 "$(dirname "$0")/../../bench/anchors/cublas_bf16.py" --preset "$preset" >"$out/cublas_$preset.txt" 2>&1
echo "cublas $preset rc=$?"
