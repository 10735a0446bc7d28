#!/usr/bin/env bash
# Compiles, on this (CPU) machine, the sm_90a kernels that `moeq verify` and tests/gpu use, into
# .cache-dev/ (ignored by git): carry it to the device machine with the build folder
# (`carry: ["build", ".cache-dev"]`, `export MOEQ_CACHE_DIR=$PWD/.cache-dev`) and the GPU runs
# spend no device time in NVRTC. The cache key includes the NVRTC version: both machines have 13.0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
moeq="${1:-$root/build/moeq}"
export MOEQ_CACHE_DIR="$root/.cache-dev"
grep -qx '/.cache-dev/' "$root/.git/info/exclude" 2>/dev/null || echo '/.cache-dev/' >>"$root/.git/info/exclude"
for scheme in int4-g128 mxfp4 nvfp4 mxfp8 fp8-channel fp8-block int8-ch int8-g64 int4-g32-zp int4-g64-zp \
              mxfp4:f16 int4-g128:f16; do
  for activation in silu swiglu-oai relu2-no-mul gelu gelu-no-mul; do
    "$moeq" compile --arch sm_90a --preset tiny --scheme "$scheme" --activation "$activation" | tail -1
  done
done
"$moeq" cache info
