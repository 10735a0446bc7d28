#!/usr/bin/env bash
# Session 35, call 1: the warp-specialized consumers fold MXFP4's e2m1 bias into the scale (one bf16
# multiply per pair instead of two) where a consumer warpgroup's vote over a scale group allows it.
# Tests of the warp-specialized tiles (one process per tile, in parallel), then GEMMs alone B N N B
# on the tables' tiles, the steps B N N B, and the stall profile of gpt-oss-120b GEMM2 at M = 1024.
# Usage: v96_ws_mx_fold.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
here="$(dirname "$0")"
i=0
for tile in 48x256/1x8x1/8/p 80x256/1x8x1/6/p 144x256/1x8x1/4/p; do
  MOEQ_TEST_TILES="$tile" timeout 240 "$build/moeq_gpu_tests" \
    --gtest_filter=MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct >"$out/gpu_tests_$i.txt" 2>&1 &
  i=$((i + 1))
done
MOEQ_TEST_TILES="80x256/1x8x1/6/p/s 48x256/1x8x1/6/p/s" \
  timeout 240 "$build/moeq_gpu_tests" --gtest_filter=MoeGemmGpu.PersistentTilesEqualOneTilePerCta >"$out/gpu_tests_p.txt" 2>&1 &
timeout 240 "$build/moeq_gpu_tests" \
  --gtest_filter=MoeGemmGpu.MxScalesAboveTwoTakeTheUnfoldedPathWithTheSameValues:ExpertsGpu.WarpSpecializedTilesOf80To144RowsMatchOracle \
  >"$out/gpu_tests_x.txt" 2>&1 &
wait
echo "gpu tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|^\[  PASSED|Failure|rel |differ" | head -40 | cut -c1-200
for who in base new new base; do
  for spec in "gpt-oss-120b mxfp4 1024 2048 4096" "qwen3-30b-a3b mxfp4 1024 2048 4096" "gpt-oss-20b mxfp4 1024 2048"; do
    read -r preset scheme ms <<<"$spec"
    # shellcheck disable=SC2086
    timeout 60 "${bins[$who]}" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" -M $ms \
      --tuning "tuning/sm_90/${preset}_${scheme}.json" >"$out/o.tmp" 2>&1
    grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
  done
  echo "rc=$? gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; s[k]+=$6; n[k]++; v[k]=v[k]" "$1":"$6} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/gemms.txt" | sort
for who in base new new base; do
  timeout 100 "${bins[$who]}" bench --trials 5 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 \
    -M 1024 2048 4096 >"$out/o.tmp" 2>&1
  echo "rc=$? steps $who $(($(date +%s) - t0)) s"
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
done
awk '{k=$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$1":"$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" | sort
SASS=1 OUT="$out" "$here/ncu_gemm.sh" "$build/moeq" "gpt-oss-120b mxfp4 1024 gemm2 48x256/1x8x1/6/p/s"
python3 "$here/ncu_source_top.py" 14 <"$out/ncu_gpt-oss-120b_mxfp4_1024_gemm2_48x256-1x8x1-6-p-s_sass.csv" | cut -c1-120
grep -E "Duration|Warp Cycles Per Issued|Issued Warp" "$out/ncu_gpt-oss-120b_mxfp4_1024_gemm2_48x256-1x8x1-6-p-s.txt"
echo "done $(($(date +%s) - t0)) s"
