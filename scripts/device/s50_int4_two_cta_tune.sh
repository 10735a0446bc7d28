#!/usr/bin/env bash
# Qwen3-30B-A3B INT4-g128 (the layer of the guide's bar) at 10-40 rows per expert (M = 160-640), where its shipped
# table still holds session 20-32 entries or gaps the planner serves (rows (1024, 2816]: M = 129-352, the planner's 24-
# and 32-row direct tiles), while the MXFP4 table took the two-CTA `24x256/1x8x1/4/o2/p/t` (session 45, whole steps on
# an H100: Qwen3 MXFP4 -5.4% at M = 256, even at 160 / 384; gpt-oss-120b -2.0% to -8.5%) and 48-row warp-specialized
# entries (sessions 46-47). The two-CTA tiles are legal INT4 candidates since session 43 but no INT4 table was tuned
# with them. Session 30's anchors (H200): INT4 GEMM1 at M = 256 / 1024 was 1.22x / 1.23x Humming's.
# `moeq tune --steps --update` over every legal candidate at the rows' M, then whole steps O N N O (O: the shipped
# table, N: the updated one through `--tuning`) and `moeq verify --tuning` of the updated table.
# Prediction: the two-CTA tile wins at M = 192-320 as it did for MXFP4 at 256 (~-5% a step); M >= 512 within 2%.
# Usage: s50_int4_two_cta_tune.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
table="$root/tuning/sm_90/qwen3-30b-a3b_int4-g128.json" new="$out/qwen3-30b-a3b_int4-g128.json"
timeout 300 "$build/moeq" tune --preset qwen3-30b-a3b --scheme int4-g128 -M 160 192 256 320 384 512 640 --steps \
  --min-gain 2 --update "$table" --out "$new" >"$out/tune.txt" 2>&1
echo "tune rc=$? $(($(date +%s) - t0)) s"
grep -E "^ +[0-9]+ |^tune: [a-z]" "$out/tune.txt"
[ -s "$new" ] || { echo "no table written"; exit 1; }
for who in O N N O; do
  flags=""
  [ "$who" = N ] && flags="--tuning $new"
  # shellcheck disable=SC2086
  timeout 90 "$build/moeq" bench --trials 5 --kernel layer $flags --preset qwen3-30b-a3b --scheme int4-g128 \
    -M 160 256 384 512 640 >"$out/o.tmp" 2>&1
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" '{print w, $2, $3, $4, $5, $6, $8}' \
    >>"$out/steps.txt"
  grep -E "^copy" "$out/o.tmp" | head -1
done
echo "steps $(($(date +%s) - t0)) s"
timeout 120 "$build/moeq" verify --preset qwen3-30b-a3b --scheme int4-g128 --tuning "$new" --activation silu \
  -M 160 256 384 --layout indexed contiguous >"$out/verify.txt" 2>&1
echo "verify rc=$? $(($(date +%s) - t0)) s"
grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
