#!/usr/bin/env bash
# Session 39, call 12: gpt-oss-120b's MXFP4 step at M = 2048 takes ~100 us more than its kernels (call 7; no nsys on
# the machine, call 11): the step with programmatic dependent launch (P, the default) against without (S, MOEQ_PDL=0:
# each kernel starts after the one before has finished), and with it skipped for the GEMMs only (G), P S G G S P.
# Usage: v123_pdl_step.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
for who in P S G G S P; do
  case "$who" in
    P) env_set=() ;;
    S) env_set=(MOEQ_PDL=0) ;;
    G) env_set=(MOEQ_PDL_SKIP=moeq_moe_gemm) ;;
  esac
  env "${env_set[@]}" timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 \
    -M 1024 1024 2048 >"$out/o.tmp" 2>&1
  grep -E '^layer  gpt' "$out/o.tmp" | awk -v s="$who" '{print s, $4, $5}' >>"$out/pdl.txt"
  echo "$who $(($(date +%s) - t0)) s"
done
sort -k2,2n -k1,1 "$out/pdl.txt"
