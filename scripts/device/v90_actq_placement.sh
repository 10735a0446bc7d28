#!/usr/bin/env bash
# Session 34, call 2: is the fused activation-quantize's cost under programmatic dependent launch its CTAs'
# placement? Started early, its CTAs (256 threads, 33 KB static shared memory) become resident as GEMM1's
# last CTAs leave, up to 6 an SM, so the first SMs to free up may take most of the grid. Variants by the
# timing diagnostics (docs/env.md), each in its own process, order V0..V4 V4..V0: V0 as shipped (no early
# start), V1 early start, V2 early start with padding to at most 2 CTAs an SM, V3 that padding without the
# early start, V4 early start, one CTA an SM, grid capped at 132 (the kernel loops over rows).
# Usage: v90_actq_placement.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A envs=([V0]="" [V1]="MOEQ_DIAG_ACTQ_PDL=1" [V2]="MOEQ_DIAG_ACTQ_PDL=1 MOEQ_DIAG_ACTQ_SMEM=80000"
  [V3]="MOEQ_DIAG_ACTQ_SMEM=80000" [V4]="MOEQ_DIAG_ACTQ_PDL=1 MOEQ_DIAG_ACTQ_SMEM=150000 MOEQ_DIAG_ACTQ_GRID=132")
for v in V0 V1 V2 V3 V4 V4 V3 V2 V1 V0; do
  # shellcheck disable=SC2086
  env ${envs[$v]} timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b \
    --scheme mxfp4 mxfp4:fp8-token -M 16 16 64 256 1024 >"$out/o.tmp" 2>&1
  echo "rc=$? $v $(($(date +%s) - t0)) s"
  grep -E '^layer  qwen' "$out/o.tmp" | awk -v s="$v" '{print s, $3, $4, $5}' >>"$out/steps.txt"
done
awk '{k=$2" "$3" "$1; s[k]+=$4; n[k]++; v[k]=v[k]" "$4} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' \
  "$out/steps.txt" | sort -k1,1 -k2,2n -k3,3
echo "done $(($(date +%s) - t0)) s"
