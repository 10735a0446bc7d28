#!/usr/bin/env bash
# Session 48: deeper rings on the 16-row direct tiles (16x128/1x4x1/4/r and /8/r, 16x64/1x4x1/4/r, 16x64/1x2x2/4/r,
# new candidates), where gpt-oss-120b M = 256 runs 16x128/1x4x1/2/r (issue 6: 1.01x Humming on the H100). The
# candidate test on them; `moeq tune --steps --update` of gpt-oss-120b and DeepSeek-V3 MXFP4 over the 8- and 16-row
# direct candidates at M = 96-256; whole steps O N N O (O: this tree's table, N: the tune's); `moeq verify --tuning N`.
# Usage: v149_block16_rings.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
new="16x128/1x4x1/4/r 16x128/1x4x1/8/r 16x64/1x4x1/4/r 16x64/1x2x2/4/r"
c="$new 16x128/1x4x1/2/r 16x64/1x4x1/2/r 8x32/1x1x4/2/r 8x32/1x1x4/4/o4/r 8x32/1x1x4/6/r 8x32/1x2x4/4/r
8x64/1x2x2/4/r 8x64/1x2x2/8/r 8x64/1x4x1/2/r 8x128/1x4x1/2/r 8x128/1x4x1/4/r 8x128/1x4x1/4/o4/r 8x128/1x4x1/8/r
8x256/1x4x1/2/r 8x256/1x8x1/4/r"
warm_tiles "mxfp4 int4-g128 fp8-block nvfp4 int8-ch mxfp8" "$new"
gpu_tests "$new" "MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct" 120
grep -c "^candidate" "$out/gpu_tests.txt"
mkdir -p "$out/t"
steps() {  # PRESET "M ..." NEW_TABLE: O N N O into steps.txt
  for who in O N N O; do
    table="$root/tuning/sm_90/${1}_mxfp4.json"
    [ "$who" = N ] && table="$3"
    # shellcheck disable=SC2086
    timeout 60 "$build/moeq" bench --trials 5 --kernel layer --preset "$1" --scheme mxfp4 -M $2 --tuning "$table" >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$who" '{print w, $2, $3, $4, $5}' >>"$out/steps.txt"
  done
  echo "steps $1 $(($(date +%s) - t0)) s"
}
for job in "gpt-oss-120b 96 128 192 256" "deepseek-v3 192 256"; do
  # shellcheck disable=SC2086
  set -- $job
  p="$1"
  shift
  [ $(($(date +%s) - t0)) -gt 250 ] && { echo "skipped $p: no time left"; continue; }
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout 120 "$build/moeq" tune --preset "$p" --scheme mxfp4 -M "$@" --steps --min-gain 2 --candidates $c \
    --update "$root/tuning/sm_90/${p}_mxfp4.json" --out "$out/t/$p.json" >>"$out/tune.txt" 2>&1
  echo "tune $p rc=$? $(($(date +%s) - start)) s"
  [ -f "$out/t/$p.json" ] && [ $(($(date +%s) - t0)) -lt 330 ] && steps "$p" "$*" "$out/t/$p.json"
done
grep -E "^ +[0-9]+ |^tune: [a-z]" "$out/tune.txt"
if [ -f "$out/t/gpt-oss-120b.json" ] && [ $(($(date +%s) - t0)) -lt 380 ]; then
  timeout 60 "$build/moeq" verify --preset gpt-oss-120b --scheme mxfp4 --activation silu -M 256 \
    --tuning "$out/t/gpt-oss-120b.json" >"$out/verify.txt" 2>&1
  echo "verify rc=$? $(($(date +%s) - t0)) s"
  grep -cE "^pass" "$out/verify.txt"; grep -E "^FAIL" "$out/verify.txt" | head -3
fi
echo "done $(($(date +%s) - t0)) s"
