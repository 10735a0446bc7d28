#!/usr/bin/env bash
# The first GPU run of docs/experiments/2026-12-05-few-ctas-ring-planner.patch (gemm_few_ctas_ring: the planner's
# few-rows tile for 4-bit codes takes a 6- or 8-deep ring by its K groups' length and CTAs per SM). Layers planned by
# the planner's rules (`--no-shipped-tuning`, and NVFP4, which has no table), whole steps O N N O: O = OLD_BUILD
# (HEAD without the patch), N = BUILD (with it). Then `moeq verify` with BUILD where the plan changed.
# Prediction (call 2 of bench/results/2026-12-05-h100-few-rows-rings.md, GEMM2 8x32/1x1x4 /2 -> /8 or /6): Mixtral MXFP4
# M = 1 ~-20 us (GEMM2 47.2 -> 25.7), M = 2 ~-12 us (47.1 -> 34.7); gpt-oss-120b M = 1 ~-2.7 us (13.5 -> 10.8); Qwen3
# M = 1 ~-1.4 us (GEMM1 10.1 -> 8.7); Mixtral INT4 M = 1 ~-10 us (GEMM2 4/o4 -> 8/r, from MXFP4's 35.9 -> 25.7). No change elsewhere.
# Usage: v150_few_ctas_ring_planner.sh BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_build="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
steps() {  # PRESET SCHEME "M ...": O N N O into steps.txt
  for who in O N N O; do
    bin="$build/moeq"
    [ "$who" = O ] && bin="$old_build/moeq"
    # shellcheck disable=SC2086
    timeout 60 "$bin" bench --trials 5 --kernel layer --no-shipped-tuning --preset "$1" --scheme "$2" -M $3 >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" '{print w, $2, $3, $4, $5, $6, $8}' >>"$out/steps.txt"
    grep -E "^copy" "$out/o.tmp" | head -1
  done
  echo "steps $1 $2 $(($(date +%s) - t0)) s"
}
steps mixtral-8x7b mxfp4 "1 2 4"
steps mixtral-8x7b int4-g128 "1 2"
steps mixtral-8x7b nvfp4 "1 2"
steps gpt-oss-120b mxfp4 "1 2"
steps qwen3-30b-a3b mxfp4 "1 2"
for job in "mixtral-8x7b nvfp4 1 2" "qwen3-30b-a3b nvfp4 1"; do  # NVFP4: no table, the planner's 8- and 6-deep tiles
  # shellcheck disable=SC2086
  set -- $job
  p="$1" s="$2"
  shift 2
  timeout 120 "$build/moeq" verify --preset "$p" --scheme "$s" --activation silu -M "$@" >>"$out/verify.txt" 2>&1
  echo "verify $p $s rc=$? $(($(date +%s) - t0)) s"
done
grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
echo "done $(($(date +%s) - t0)) s"
