#!/usr/bin/env bash
# Issue 6's losses of session 59 (H200 side by side, bench/results/2026-12-06-h200-s59-side-by-side.md) that the
# shipped tables may cause: Qwen3-30B-A3B INT4-g128 at M = 256 / 1024 (GEMMs 1.227 / 1.105 of Humming's) and GEMM2 at
# 4096 (1.145), DeepSeek-V3 FP8-block at M = 256 / 1024 (steps 1.049 / 1.211). Both tables were last tuned on an H100
# (session 50) or earlier. For one layer: `moeq tune --steps --update` over every legal candidate at those M on this
# GPU, then whole steps O N N O (O: the shipped table, N: the updated one through `--tuning`; steps.txt) and
# `moeq verify --tuning`.
# Packs: `--preset P --scheme S --tile candidates` lines (scripts/device/lists/s60_retune_pack.txt).
# Prediction: Qwen3 INT4 M = 256 takes a two-CTA or 48-row warp-specialized pair (-3 to -6% a step, as MXFP4's table
# has); DeepSeek-V3 M = 1024 a 48x512 or 64x256 tile (-5 to -15%: Humming's 40x512 runs at 82-86% of copy there).
# Usage: s60_retune.sh BUILD PRESET SCHEME M...   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
preset="$2" scheme="$3"
shift 3
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
table="$root/tuning/sm_90/${preset}_$scheme.json" new="$out/${preset}_$scheme.json"
# Every candidate compiled first on all cores (a cold cache otherwise compiles them one by one inside the search).
timeout 240 "$build/moeq" compile -j 16 --preset "$preset" --scheme "$scheme" --tile candidates >"$out/compile.txt" 2>&1
echo "compile rc=$? $(($(date +%s) - t0)) s: $(tail -1 "$out/compile.txt")"
# shellcheck disable=SC2068
timeout 300 "$build/moeq" tune --preset "$preset" --scheme "$scheme" -M $@ --steps --min-gain 2 --update "$table" \
  --out "$new" >"$out/tune.txt" 2>&1
echo "tune rc=$? $(($(date +%s) - t0)) s"
grep -E "^ +[0-9]+ |^tune: [a-z]" "$out/tune.txt"
[ -s "$new" ] || { echo "no table written"; exit 1; }
# O N N O as layer_steps rows: "shipped N ..." is O, "<table file> N ..." is N (DeepSeek-V3 steps need over 60 s).
export STEP_TIMEOUT="${STEP_TIMEOUT:-120}"
for who in O N N O; do
  if [ "$who" = O ]; then layer_steps shipped "$preset" "$scheme" "$*" N; else layer_steps "$new" "$preset" "$scheme" "$*" N; fi
done
timeout 120 "$build/moeq" verify --preset "$preset" --scheme "$scheme" --tuning "$new" --activation silu -M 16 256 \
  --layout indexed contiguous >"$out/verify.txt" 2>&1
echo "verify rc=$? $(($(date +%s) - t0)) s"
grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
