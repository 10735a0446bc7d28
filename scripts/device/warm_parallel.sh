#!/usr/bin/env bash
# Warms MOEQ_CACHE_DIR on the device machine itself, one `moeq compile` process per core: a
# device-header change invalidates every cached kernel, and the tests plus the tile candidates
# come to more cubins than the 64 MiB a device call may carry. The processes run side by side (16
# cores on the H200 machine), one compile thread each (`moeq compile -j 1`: its default is a thread
# per core, which under 16 processes would hold 256 NVRTC compiles in memory at once).
# Usage: warm_parallel.sh MOEQ [JOBS]   (env MOEQ_CACHE_DIR must be set)
set -u
moeq="$1"
jobs="${2:-$(nproc)}"
: "${MOEQ_CACHE_DIR:?set MOEQ_CACHE_DIR}"
{
  # Every tuning candidate for the schemes tests/gpu checks on every tile (and `moeq bench --tile`
  # times); the few tiles test_moe_gemm_gpu.cpp checks the other schemes on.
  # NOTE: the layer's candidates (`moeq compile --list-tiles`: those legal for it) cut into 4 shards per
  # scheme: one process per scheme with all of them was the long pole (88 kernels, ~2 minutes).
  for scheme in int4-g128 mxfp4 fp8-block; do
    mapfile -t candidates < <("$moeq" compile --preset tiny --scheme "$scheme" --tile candidates --list-tiles)
    for shard in 0 1 2 3; do
      tiles=()
      for i in "${!candidates[@]}"; do [ $((i % 4)) -eq $shard ] && tiles+=("${candidates[$i]}"); done
      echo "--preset tiny --scheme $scheme --tile ${tiles[*]}"
    done
  done
  for scheme in nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch int4-g128:f16; do
    echo "--preset tiny --scheme $scheme --tile 16x32/1x2x4/8 32x128/1x4x2/8 64x256/2x4x1/3 8x128/1x4x1/4" \
         "8x32/1x1x4/16 8x128/1x4x1/4/k2 8x32/1x1x4/16/k4 64x128/1x4x1/4/w 128x256/1x8x1/4/p 8x128/1x4x1/2/r 8x64/1x2x2/2/r" \
         "8x32/1x1x4/2/r 8x128/1x4x1/4/o4/r 8x32/1x1x4/4/o4/r"
  done
  # The planner's kernels of `moeq verify` and the experts tests (warm_cache.sh's list).
  for scheme in int4-g128 mxfp4 nvfp4 mxfp8 fp8-channel fp8-block int8-ch int8-g64 int4-g32-zp int4-g64-zp \
                mxfp4:f16 int4-g128:f16; do
    for activation in silu swiglu-oai relu2-no-mul gelu gelu-no-mul; do
      echo "--preset tiny --scheme $scheme --activation $activation"
    done
  done
} | xargs -P "$jobs" -L 1 sh -c "\"$moeq\" compile -j 1 --arch sm_90a \$0 \"\$@\" | tail -1" | sort | uniq -c
"$moeq" cache info
