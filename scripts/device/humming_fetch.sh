#!/usr/bin/env bash
# Run HERE (network): downloads the humming-kernels wheel and the packages it imports into
# .cache-device/wheels/ (untracked, not ignored: it travels with the working tree to the GPU
# machine, which has no network). Wheels for the GPU machine: CPython 3.12, x86-64 manylinux.
# The GPU image already has every dependency (KINDS.md's package list); those wheels are a fallback
# that scripts/device/humming_anchor.sh installs only for an import that fails. Versions pinned so
# that the folder never holds two versions of one package.
# Usage: scripts/device/humming_fetch.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="$root/.cache-device/wheels"
mkdir -p "$dest"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$dest" \
  humming-kernels==0.1.20 jinja2==3.1.6 markupsafe==3.0.4 filelock==4.3.1 packaging==26.4 tqdm==4.70.1 \
  tabulate==0.10.0 cuda-pathfinder==1.9.1 cuda-bindings==13.5.0
ls -l "$dest"
