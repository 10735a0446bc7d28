#!/usr/bin/env bash
# Run ON THE GPU MACHINE: installs Humming offline from .cache-device/wheels/ (fill it here first
# with scripts/device/humming_fetch.sh) and times its MoE GEMMs on moeq's shapes
# (bench/anchors/humming_moe.py); the output goes to $OUT/humming.txt.
# Usage: scripts/device/humming_anchor.sh [humming_moe.py options...]   (env: OUT, HUMMING_TIMEOUT)
#   e.g. scripts/device/humming_anchor.sh --preset qwen3-30b-a3b --scheme int4-g128
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
wheels="$root/.cache-device/wheels"
out="${OUT:-/tmp/humming-out}"
site=/tmp/humming-site
mkdir -p "$out"
# PyTorch extensions built with the default g++ (/opt/gcc) crashed on this machine; Humming only
# builds one when it cannot use its precompiled launcher, but then it must use this compiler.
export CXX=/usr/bin/g++
pip_offline=(python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --find-links "$wheels" --target "$site")
"${pip_offline[@]}" humming-kernels==0.1.20
missing=()
for pair in jinja2:jinja2 markupsafe:markupsafe filelock:filelock packaging:packaging tqdm:tqdm \
            tabulate:tabulate cuda.pathfinder:cuda-pathfinder cuda.bindings.driver:cuda-bindings; do
  python3 -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from wheels: ${missing[*]}"
  "${pip_offline[@]}" "${missing[@]}"
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# The launcher's RUNPATH expects torch next to it in site-packages; point the loader at torch/lib.
torch_lib="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HUMMING_CACHE_DIR="${HUMMING_CACHE_DIR:-/tmp/humming-cache}" HUMMING_TMP_DIR="${HUMMING_TMP_DIR:-/tmp/humming-tmp}"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true; } | tee "$out/humming.txt"
# The device call's limit is 600 s; stop first so that the log comes back (HUMMING_TIMEOUT to change).
timeout "${HUMMING_TIMEOUT:-570}" python3 "$root/bench/anchors/humming_moe.py" "$@" 2>&1 | tee -a "$out/humming.txt"
