#!/usr/bin/env bash
# Session 16, call C: GEMM2 (short K: Qwen3-30B-A3B K = 768, 12 K tiles) over the 8-row direct tiles, to
# see whether more CTAs or K groups beat the planner's tile there. SWEEP: "PRESET|M ...|SCHEME ...|TILE ..."
# lines; each line: the planner first (no --tile), then the tiles, GEMM2 only, one process per scheme.
# Usage: v17_gemm2_sweep.sh MOEQ   (env OUT; SWEEP; ROUNDS, default 1)
set -u
moeq="$1"
out="${OUT:-/tmp/moeq-out}"; mkdir -p "$out"
export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device/cache}"
t0=$(date +%s)
echo "$SWEEP" | while IFS='|' read -r p m schemes tiles; do
  [ -z "$p" ] && continue
  for s in $schemes; do
    echo "$moeq compile --arch sm_90a --preset $p --scheme $s"
    for t in $tiles; do echo "$moeq compile --arch sm_90a --preset $p --scheme $s --tile $t"; done
  done
done | xargs -P 16 -I{} sh -c "{} | tail -1" >"$out/warm.txt" 2>&1
echo "warm rc=$? $(($(date +%s) - t0)) s"
for round in $(seq 1 "${ROUNDS:-1}"); do
  echo "$SWEEP" | while IFS='|' read -r p m schemes tiles; do
    [ -z "$p" ] && continue
    for s in $schemes; do
      # shellcheck disable=SC2086
      timeout 100 "$moeq" bench --trials 5 --kernel gemm2 --preset $p --scheme $s -M $m >>"$out/planner_r$round.txt" 2>&1
      # shellcheck disable=SC2086
      timeout 200 "$moeq" bench --trials 5 --kernel gemm2 --preset $p --scheme $s -M $m --tile $tiles >>"$out/tiles_r$round.txt" 2>&1
    done
    echo "round $round $p $(($(date +%s) - t0)) s"
  done
done
echo "done $(($(date +%s) - t0)) s"
