#!/usr/bin/env bash
# The main job: set up, build, then `moeq run` with its built-in default (extra arguments are
# passed to `moeq`, e.g. scripts/run.sh run --preset gpt-oss-20b --tokens 4).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
moeq_install_dependencies
moeq_configure_and_build --target moeq
exec "$MOEQ_BUILD/moeq" "$@"
