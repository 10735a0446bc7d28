#!/usr/bin/env bash
# Installs what moeq's build needs when it is missing (Debian/Ubuntu, as root or with sudo),
# then configures the build folder. Sourced by scripts/run.sh and scripts/test.sh.
set -euo pipefail

MOEQ_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MOEQ_BUILD="${MOEQ_BUILD:-$MOEQ_ROOT/build}"

moeq_missing_packages() {
  local missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v ninja >/dev/null || missing+=(ninja-build)
  command -v g++ >/dev/null || missing+=(g++)
  [ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
  [ -f /usr/include/gmock/gmock.h ] || missing+=(libgmock-dev)
  [ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
  [ -f /usr/include/CLI/CLI.hpp ] || missing+=(libcli11-dev)
  echo "${missing[@]:-}"
}

moeq_install_dependencies() {
  local missing
  missing="$(moeq_missing_packages)"
  [ -z "$missing" ] && return 0
  echo "moeq: installing missing packages: $missing"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  # shellcheck disable=SC2086
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
}

moeq_configure_and_build() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  if [ ! -f "$MOEQ_BUILD/CMakeCache.txt" ]; then
    cmake -S "$MOEQ_ROOT" -B "$MOEQ_BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
  fi
  cmake --build "$MOEQ_BUILD" --parallel "$(nproc)" "$@"
}
