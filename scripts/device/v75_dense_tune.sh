#!/usr/bin/env bash
# Session 32, call 1: `moeq tune` at the M between the shipped tables' samples (1.5x and 1.25x the powers of
# two), Qwen3-30B-A3B and gpt-oss-120b MXFP4, every candidate pre-compiled here and carried. The tune times
# the planner's block and its neighbours, checks each tile against the reference first, and keeps a pick
# only where it beats the planner's tiles by 1% in alternating confirm rounds (`kept`). The picks are
# merged into the shipped tables (then by a script of d0e3662; now `moeq tune --update`), then timed as whole steps (v76).
# Usage: v75_dense_tune.sh BUILD "PRESET:SCHEME:M,M,... ..."   (env OUT, TUNE_DEADLINE seconds)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
deadline=$((t0 + ${TUNE_DEADLINE:-560}))
touch "$out/.start"
for item in $2; do
  preset="${item%%:*}" rest="${item#*:}"
  scheme="${rest%%:*}" tokens="${rest#*:}"
  left=$((deadline - $(date +%s)))
  [ "$left" -lt 20 ] && { echo "skipped $item: no time left"; continue; }
  # shellcheck disable=SC2046
  timeout "$left" "$build/moeq" tune --preset "$preset" --scheme "$scheme" -M $(echo "$tokens" | tr ',' ' ') \
    --out "$out/${preset}_${scheme}.json" >>"$out/tune.txt" 2>&1
  echo "tune $preset $scheme rc=$? $(($(date +%s) - t0)) s"
done
cat "$out/tune.txt" | grep -v "^tune: wrote"
n=$(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l)
echo "cubins compiled on the device: $n"
echo "done $(($(date +%s) - t0)) s"
