#!/usr/bin/env bash
# Next session's tables call (docs/perf-notes.md, "Next (written at the end of session 46)"): Qwen3-30B-A3B MXFP4
# rows (4096, 4608] (M = 513-576, session 32's 48x128/1x4x1/4: 239 us at M = 576 against 213 at M = 600 in session 46)
# through `moeq tune --update` with the 48- and 64-row warp-specialized tiles, whole steps O N N O beside it; then
# `moeq tune` of Mixtral-8x7B MXFP4, which has no table (every candidate is in the v136 pack; FP8-block: v140).
# Usage: v139_next_tables.sh BUILD   (env OUT, MOEQ_CACHE_DIR, TUNE_TIMEOUT, STEPS_DEADLINE, TUNE_SECONDS)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
c="48x256/1x8x1/6/p/s/t,48x256/1x8x1/8/p/t,48x512/1x8x1/6/p/t,48x512/1x8x1/4/p/t,64x256/1x8x1/8/p/s/t,48x128/1x4x1/4"
tune_update_tables "qwen3-30b-a3b:576:$c"
STEPS_DEADLINE=${STEPS_DEADLINE:-200} steps_old_new qwen3-30b-a3b mxfp4 "512 544 576 600" "$out/qwen3-30b-a3b_mxfp4.json" steps.txt
awk '{k=$2" "$4; t[k" "$1]+=$5; n[k" "$1]++} END {for (x in t) print x, t[x]/n[x]}' "$out/steps.txt" | sort
left=$((580 - ($(date +%s) - t0)))
# NOTE: `timeout 0` is no limit at all: with under a minute left the tune is skipped.
[ "${TUNE_SECONDS:-$left}" -ge 60 ] || { echo "no time left for the Mixtral tune ($left s)"; exit 0; }
tune_layers "${TUNE_SECONDS:-$left}" "mixtral-8x7b mxfp4 1 2 4 8 16 32 64 128 256 512 1024 2048 4096"
grep -E "^ +[0-9]|wrote|candidate" "$out/tune.txt" | tail -40
echo "done $(($(date +%s) - t0)) s"
