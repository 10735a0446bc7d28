#!/usr/bin/env bash
# The first GPU run of docs/experiments/2026-12-05-verify-shared-problems.patch (`moeq verify` makes one problem and
# oracle per (scheme, activation, M, input kind), shared by its layouts and code layouts). Session 47's call 6 ran
# the same cases one problem each (bench/results/2026-12-05-h100-tables-mixtral-deepseek.md): Mixtral-8x7B MXFP4
# M = 4 / 32 / 128, 16 of 18 cases within its 150 s limit; Qwen3-30B-A3B MXFP4 M = 544, 4 cases in ~11 s. The
# rel err of each case must be the same as there (same seeds, same bytes), and the whole run much shorter.
# Usage: v145_verify_shared.sh BUILD   (env OUT, MOEQ_CACHE_DIR); BUILD's moeq built with the patch.
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for args in "mixtral-8x7b mxfp4 4 32 128" "qwen3-30b-a3b mxfp4 544"; do
  # shellcheck disable=SC2086
  set -- $args
  p="$1" s="$2"
  shift 2
  start=$(date +%s)
  timeout 200 "$build/moeq" verify --preset "$p" --scheme "$s" --activation silu -M "$@" >"$out/verify_$p.txt" 2>&1
  echo "verify $p $s rc=$? $(($(date +%s) - start)) s"
  sort "$out/verify_$p.txt" | grep -E "^(pass|FAIL)"
done
echo "done $(($(date +%s) - t0)) s"
