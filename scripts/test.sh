#!/usr/bin/env bash
# The whole test suite: set up, build everything, run every test through CTest.
# GPU tests skip with a reason where there is no CUDA device.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
moeq_install_dependencies
moeq_configure_and_build
cd "$MOEQ_BUILD"
# The jit tests are four processes (CMakeLists.txt); one per core side by side.
ctest --output-on-failure --timeout 1500 --parallel "$(nproc)" "$@"
