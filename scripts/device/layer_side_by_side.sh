#!/usr/bin/env bash
# The full experts step side by side (issue 6): `moeq bench --kernel layer` with the shipped tuning
# tables and with the planner's rules, and Humming's whole step (humming_moe.py --layer), on the
# same GPU in one call; before them `moeq verify` on the tuned layers (the shipped tables' tiles
# through Experts::apply) and the warm-up test.
# Usage: layer_side_by_side.sh BUILD "PRESETS" "SCHEMES" "TOKENS"   (env OUT, HUMMING_TIMEOUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
presets=($2) schemes=($3) tokens=($4)
root="$(cd "$(dirname "$0")/../.." && pwd)"
warm_layers "${presets[*]}" "${schemes[*]}"
timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset "${presets[@]}" --scheme "${schemes[@]}" \
  -M "${tokens[@]}" >"$out/moeq_layer.txt" 2>&1
echo "layer shipped rc=$? $(($(date +%s) - t0)) s"
timeout 60 "$build/moeq" bench --trials 7 --kernel layer --no-shipped-tuning --preset "${presets[@]}" \
  --scheme "${schemes[@]}" -M "${tokens[@]}" >"$out/moeq_layer_planner.txt" 2>&1
echo "layer planner rc=$? $(($(date +%s) - t0)) s"
{
  # NOTE: each case builds its layer's weights on the host (~10 s for gpt-oss-120b on 16 cores): session 46's
  # 40 s and 30 s limits cut both runs after 8 and 2 of their 16 and 6 cases, and a tail kept only 4 lines of each.
  timeout 120 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4 int4-g128 --layout indexed masked \
    --activation silu -M 1 16 64 256 --codes prepared 2>&1
  echo "verify qwen3-30b-a3b rc=$?"
  timeout 120 "$build/moeq" verify --preset gpt-oss-120b --scheme mxfp4 --layout indexed masked \
    --activation swiglu-oai -M 1 16 64 --codes prepared 2>&1
  echo "verify gpt-oss-120b rc=$?"
  timeout 30 "$build/moeq_gpu_warmup_test" 2>&1 | tail -3
} >"$out/verify.txt" 2>&1
echo "verify $(($(date +%s) - t0)) s"
grep -E "^FAIL|verify|PASSED|FAILED" "$out/verify.txt" | head
HUMMING_TIMEOUT="${HUMMING_TIMEOUT:-200}" OUT="$out" bash "$root/scripts/device/humming_anchor.sh" --layer \
  --preset "${presets[@]}" --scheme "${schemes[@]}" --tokens "${tokens[@]}" >"$out/humming_log.txt" 2>&1
echo "humming rc=$? $(($(date +%s) - t0)) s"
tail -3 "$out/humming_log.txt"
