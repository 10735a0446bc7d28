#!/usr/bin/env bash
# Packs the kernel cache a device call needs, here (no GPU): compiles what `moeq compile` lines name
# into MOEQ_CACHE_DIR (kept outside the repo between sessions), records which cubins those lines read
# (strace), and tars just those with the binaries (xz: a third of gzip's size for cubins). So a call
# carries 25-35 MB instead of the whole cache (over the 64 MiB a call may carry), and the device
# compiles nothing it can be handed.
# NOTE: the call must carry the binaries packed here (copy BUILD's into the carried folder at the same time):
# session 37's call 2 carried a moeq built before the change it timed and ran none of the kernels packed for it.
# NOTE: two passes: a kernel compiled in the first is written under a temporary name and renamed, so
# only the second pass, all cache hits, opens every cubin under its own name.
# Usage: pack_cache.sh BUILD LINES TXZ [EXTRA_DIR...]
#   LINES: one `moeq compile` argument list per line (blank lines and # comments skipped; --arch sm_90a
#   is added); a line starting with `bin=NAME` runs $MOEQ_CACHE_DIR/bin/NAME (e.g. a baseline binary)
#   instead of BUILD's moeq (BUILD's runs with `-j 1`: the lines run side by side, a process per core). EXTRA_DIR: folders of MOEQ_CACHE_DIR to add whole (e.g. tuning tables).
set -eu
build="$1" lines="$2" tgz="$3"
shift 3
: "${MOEQ_CACHE_DIR:?set MOEQ_CACHE_DIR}"
mkdir -p "$MOEQ_CACHE_DIR/bin"
for b in moeq moeq_gpu_tests moeq_gpu_warmup_test; do cp "$build/$b" "$MOEQ_CACHE_DIR/bin/$b"; done
jobs=$(nproc)
# binary_and_args LINE: the binary to run and the compile arguments, one per line.
binary_and_args() {
  case "$1" in
    bin=*) read -r first rest <<<"$1"; echo "$MOEQ_CACHE_DIR/bin/${first#bin=}"; echo "$rest" ;;
    *) echo "$build/moeq"; echo "-j 1 $1" ;;
  esac
}
grep -Ev '^\s*(#|$)' "$lines" | while read -r line; do binary_and_args "$line" | paste -sd' '; done |
  xargs -P "$jobs" -L 1 sh -c "\"\$0\" compile --arch sm_90a \"\$@\" | tail -1" | sort | uniq -c
trace=$(mktemp)
grep -Ev '^\s*(#|$)' "$lines" | while read -r line; do
  { read -r binary; read -r args; } < <(binary_and_args "$line")
  # shellcheck disable=SC2086
  strace -f -e trace=openat -o "$trace.$$" "$binary" compile --arch sm_90a $args >/dev/null 2>&1 || true
  grep -o "$MOEQ_CACHE_DIR/v[0-9]*/[0-9a-f]*/[0-9a-f]*\.cubin" "$trace.$$" || true
done | sort -u | sed "s|^$MOEQ_CACHE_DIR/||" >"$trace"
echo "$(wc -l <"$trace") cubins"
XZ_OPT="-6 -T0" tar cJf "$tgz" -C "$MOEQ_CACHE_DIR" bin "$@" -T "$trace"
rm -f "$trace" "$trace.$$"
ls -la "$tgz"
