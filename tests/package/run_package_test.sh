#!/usr/bin/env bash
# moeq as a dependency, end to end: `cmake --install` of this build into a scratch prefix, then a program that
# finds it with find_package(moeq) builds, links and runs (tests/package/consumer); and a parent project that
# add_subdirectory()s the source tree configures with moeq::moeq and without the CLI or the tests.
# Usage: run_package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in include/moeq/experts.hpp "lib*/cmake/moeq/moeqConfig.cmake" "lib*/libmoeq_core.a"; do
  compgen -G "$tmp/prefix/$f" >/dev/null || { echo "not installed: $f"; cat "$tmp/install.log"; exit 1; }
done
cmake -S "$here/consumer" -B "$tmp/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; exit 1; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; exit 1; }
"$tmp/consumer/moeq_consumer"
cmake -S "$here/subproject" -B "$tmp/subproject" "${generator[@]}" -DMOEQ_SOURCE_DIR="$source" \
  >"$tmp/subproject.log" 2>&1 || { cat "$tmp/subproject.log"; exit 1; }
echo "ok: add_subdirectory configures moeq::moeq alone"
