#!/usr/bin/env bash
# Issue 5 at M = 4096: where the e4m3 wgmma body (`--fp8-wgmma`: canonical MXFP4 x FP8 per token, e4m3 MMAs with a
# promotion per 128-k tile, the permuting producer) stands today against the 16-bit values path and the bf16 step.
# Session 24 measured it at 670 us against the 16-bit tile's 526 (GEMM1 alone); the 16-bit body has since gained the
# `/t` order, persistent tiles and 144-row blocks (GEMM1 378 us), the e4m3 body none of them.
# Prediction: the e4m3 step slower than the values path by 10-30% (its serial wait and promote per K tile).
# Whole steps of Qwen3-30B-A3B, canonical codes, M = 4096, one process each, in the order bf16 V E E V bf16
# (V: FP8 per token on the values path; E: the same with --fp8-wgmma).
# Usage: s62_e4m3_body.sh BUILD   (env OUT, MOEQ_CACHE_DIR, WHO: the processes; cold kernels compile in the first
# process of each kind)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for who in ${WHO:-bf16 V E E V bf16}; do
  case "$who" in
    bf16) flags="--scheme mxfp4" ;;
    V) flags="--scheme mxfp4:fp8-token" ;;
    E) flags="--scheme mxfp4:fp8-token --fp8-wgmma" ;;
  esac
  # shellcheck disable=SC2086
  timeout "${STEP_TIMEOUT:-150}" "$build/moeq" bench --kernel layer --preset qwen3-30b-a3b $flags -M 4096 \
    --codes canonical --trials 5 >"$out/o.tmp" 2>&1
  echo "$who rc=$? $(($(date +%s) - t0)) s"
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | sed "s/^/$who /" | tee -a "$out/steps.txt"
  grep -E "^copy" "$out/o.tmp" | head -1
done
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
