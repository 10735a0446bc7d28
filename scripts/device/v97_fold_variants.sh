#!/usr/bin/env bash
# Session 35, call 2: why the folded MXFP4 multiplier (call 1) lost at gpt-oss-120b M = 1024 and won at
# Qwen3-30B-A3B GEMM1 M >= 2048. GEMMs alone on the tables' tiles, four binaries in A B C D D C B A order:
# base (20ec1f7), fold (the warpgroup vote and one tile body per path), v2 (always folded: no vote, no
# branch; a diagnostic, wrong for scales above 2), v3 (a per-warp vote around the dequantization alone,
# one tile body), then the stall profile of base's gpt-oss-120b GEMM2 at M = 1024.
# Usage: v97_fold_variants.sh BUILD BIN_DIR   (env OUT, MOEQ_CACHE_DIR; BIN_DIR holds moeq_s35{base,fold,v2,v3})
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
bindir="$2"
here="$(dirname "$0")"
for who in base fold v2 v3 v3 v2 fold base; do
  for spec in "gpt-oss-120b mxfp4 1024 2048 4096" "qwen3-30b-a3b mxfp4 1024 2048 4096"; do
    read -r preset scheme ms <<<"$spec"
    # shellcheck disable=SC2086
    timeout 60 "$bindir/moeq_s35$who" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" -M $ms \
      --tuning "tuning/sm_90/${preset}_${scheme}.json" >"$out/o.tmp" 2>&1
    grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
  done
  echo "rc=$? gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; s[k" "$1]+=$6; n[k" "$1]++} END {for (x in s) printf "%s %.2f\n", x, s[x]/n[x]}' "$out/gemms.txt" |
  sort | awk '{k=$1" "$2" "$3" "$4; line[k]=line[k]" "$5"="$6} END {for (k in line) print k line[k]}' | sort
SASS=1 OUT="$out" "$here/ncu_gemm.sh" "$bindir/moeq_s35base" "gpt-oss-120b mxfp4 1024 gemm2 48x256/1x8x1/6/p/s"
python3 "$here/ncu_source_top.py" 6 <"$out/ncu_gpt-oss-120b_mxfp4_1024_gemm2_48x256-1x8x1-6-p-s_sass.csv" | cut -c1-120
grep -E "Duration|Warp Cycles Per Issued" "$out/ncu_gpt-oss-120b_mxfp4_1024_gemm2_48x256-1x8x1-6-p-s.txt"
echo "done $(($(date +%s) - t0)) s"
