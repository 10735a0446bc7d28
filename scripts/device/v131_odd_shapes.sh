#!/usr/bin/env bash
# USERS.md 2 on the GPU: layers of the odd sizes users run (bench/odd-shapes/: hidden 704, 2688, 2880; intermediate 352,
# 704, 1856, none a multiple of 128; E = 6, 12, 20; biases, interleaved SwiGLU-OAI, GELU), `moeq verify` (GPU against
# the CPU reference) on every scheme legal there, M = 1, 7, 129 (300 on the small layer), both code layouts. Kernels:
# scripts/device/lists/v131_pack.txt (pack_cache.sh here). Each verify has its own timeout; the small layer goes first.
# Usage: v131_odd_shapes.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
shapes="$root/bench/odd-shapes"
verify() {  # verify SHAPE SECONDS ARGS...
  local shape="$1" seconds="$2"
  shift 2
  timeout "$seconds" "$build/moeq" verify --preset "$shapes/$shape.json" "$@" >>"$out/verify_$shape.txt" 2>&1
  echo "verify $shape $* rc=$? $(($(date +%s) - t0)) s"
}
verify k704-i352 200 --scheme mxfp4 nvfp4 mxfp8 fp8-channel fp8-block int4-g32-zp int8-ch mxfp4:fp8-token \
  --activation swiglu-oai -M 1 7 129 300
verify k2880-i704 150 --scheme mxfp4 nvfp4 fp8-block int4-g64 mxfp4:fp8-token --activation gelu -M 1 7 129
verify k2688-i1856 150 --scheme mxfp4 int4-g64 fp8-block --activation silu -M 7 129 --layout indexed masked
grep -hE "^FAIL|^verify:|error" "$out"/verify_*.txt | head -40
