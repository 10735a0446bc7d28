#!/usr/bin/env bash
# Session 68, issue 5 at M <= 256: where the FP8 per-token step's +5 / +10 us over bf16 go (Qwen3-30B-A3B MXFP4,
# M = 16 / 256; session 60's Next asked for this split and it never ran). Every kernel of one `moeq run` step of each
# scheme under ncu (scripts/device/s55_step_kernels.sh, STEP_ONLY=1: each kernel alone, caches flushed, clocks left
# alone), then one line per kernel: its name and duration, both schemes side by side (read off the CSVs here).
# Usage: s68_small_m_kernels.sh MOEQ [M ...]   (env OUT, MOEQ_CACHE_DIR)
set -u
moeq="$1"
shift
here="$(cd "$(dirname "$0")" && pwd)"
ms=("$@")
[ ${#ms[@]} -eq 0 ] && ms=(16 256)
PRESET=qwen3-30b-a3b SCHEME=mxfp4 STEP_ONLY=1 TAG=_bf16 bash "$here/s55_step_kernels.sh" "$moeq" "${ms[@]}"
PRESET=qwen3-30b-a3b SCHEME=mxfp4:fp8-token STEP_ONLY=1 TAG=_fp8 bash "$here/s55_step_kernels.sh" "$moeq" "${ms[@]}"
