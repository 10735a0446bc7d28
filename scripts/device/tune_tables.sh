#!/usr/bin/env bash
# The shipped tuning tables' device call (tuning/README.md): warms every tile candidate, then runs
# `moeq tune` for each PRESET:SCHEME, one after the other (each times on the whole GPU). The
# tables come back as $OUT/tables.tar (a device call returns at most 8 files), the logs as
# $OUT/tune.txt. A table whose tune did not finish in time is missing from the tar.
# Usage: tune_tables.sh BUILD "PRESET:SCHEME ..." [TOKENS...]   (env OUT, TUNE_DEADLINE seconds)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
pairs=($2)
shift 2
tokens=("$@")
[ ${#tokens[@]} -eq 0 ] && tokens=(1 2 4 8 16 32 64 128 256 512 1024 2048 4096)
deadline=$((t0 + ${TUNE_DEADLINE:-560}))
"$(dirname "$0")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
# Layers with a bias (gpt-oss) have their own GEMM kernel texts: their candidates, 16 shards.
for pair in "${pairs[@]}"; do
  case "$pair" in gpt-oss*) ;; *) continue ;; esac
  mapfile -t candidates < <("$build/moeq" compile --preset "${pair%%:*}" --scheme "${pair#*:}" --tile candidates --list-tiles)
  for shard in $(seq 0 15); do
    tiles=()
    for i in "${!candidates[@]}"; do [ $((i % 16)) -eq "$shard" ] && tiles+=("${candidates[$i]}"); done
    echo "--preset ${pair%%:*} --scheme ${pair#*:} --tile ${tiles[*]}"
  done
done | xargs -P 16 -L 1 sh -c "\"$build/moeq\" compile -j 1 \$0 \"\$@\" | tail -1" >>"$out/warm.txt" 2>&1
echo "warm bias rc=$? $(($(date +%s) - t0)) s"
mkdir -p "$out/tables"
for pair in "${pairs[@]}"; do
  preset="${pair%%:*}" scheme="${pair#*:}"
  left=$((deadline - $(date +%s)))
  [ "$left" -lt 20 ] && { echo "skipped $pair: no time left"; continue; }
  timeout "$left" "$build/moeq" tune --preset "$preset" --scheme "$scheme" -M "${tokens[@]}" \
    --out "$out/tables/${preset}_${scheme}.json" >>"$out/tune.txt" 2>&1
  echo "tune $pair rc=$? $(($(date +%s) - t0)) s"
done
(cd "$out" && tar cf tables.tar tables && rm -rf tables)
echo "done $(($(date +%s) - t0)) s"
