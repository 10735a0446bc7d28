#!/usr/bin/env bash
# moeq as a dependency, end to end: `cmake --install` of this build into a scratch prefix, then a program that
# finds it with find_package(moeq) builds (C++17 from moeq::moeq's compile features alone), links and runs
# (tests/package/consumer); and a parent project that add_subdirectory()s the source tree configures with
# moeq::moeq and without the CLI or the tests, and generates moeq's embedded data there (the `moeq_embedded`
# target: the paths a subproject build takes). Building the whole library a second time is left out (minutes).
# Usage: run_package_test.sh BUILD_DIR SOURCE_DIR [CMAKE CXX_COMPILER GENERATOR]   (the build's own tools; default:
# cmake, the compiler and the generator cmake picks on PATH)
set -euo pipefail
build=$1 source=$2 cmake=${3:-cmake} cxx=${4:-}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tools=()
[ -n "${5:-}" ] && tools+=(-G "$5")
[ -n "$cxx" ] && tools+=(-DCMAKE_CXX_COMPILER="$cxx")
"$cmake" --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in include/moeq/experts.hpp "lib*/cmake/moeq/moeqConfig.cmake" "lib*/libmoeq_core.a"; do
  compgen -G "$tmp/prefix/$f" >/dev/null || { echo "not installed: $f"; cat "$tmp/install.log"; exit 1; }
done
"$cmake" -S "$here/consumer" -B "$tmp/consumer" "${tools[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; exit 1; }
"$cmake" --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; exit 1; }
"$tmp/consumer/moeq_consumer"
"$cmake" -S "$here/subproject" -B "$tmp/subproject" "${tools[@]}" -DMOEQ_SOURCE_DIR="$source" \
  >"$tmp/subproject.log" 2>&1 || { cat "$tmp/subproject.log"; exit 1; }
"$cmake" --build "$tmp/subproject" --target moeq_embedded >>"$tmp/subproject.log" 2>&1 || { cat "$tmp/subproject.log"; exit 1; }
for f in embedded_presets embedded_device_headers embedded_tuning_tables; do
  grep -q 'kData0\[\]' "$tmp/subproject/moeq/generated/$f.cpp" || { echo "empty or missing: $f.cpp"; exit 1; }
done
echo "ok: add_subdirectory configures moeq::moeq alone and embeds its data"
