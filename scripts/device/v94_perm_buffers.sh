#!/usr/bin/env bash
# Session 34, call 6: four permuted token buffers instead of three on the warp-specialized tiles of up to 96
# rows (the two consumer warpgroups may drift a tile further apart before one waits for the other's
# retirement). Tests of those tiles (one process per tile, in parallel), then the GEMMs alone B N N B on
# the shipped tables' tiles, and a few steps.
# Usage: v94_perm_buffers.sh BUILD BASE_MOEQ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
i=0
for tile in 48x256/1x8x1/8/p 80x256/1x8x1/6/p 96x256/1x8x1/6/p; do
  MOEQ_TEST_TILES="$tile" timeout 200 "$build/moeq_gpu_tests" \
    --gtest_filter=MoeGemmGpu.EveryTileCandidateMatchesTheDequantizedProduct >"$out/gpu_tests_$i.txt" 2>&1 &
  i=$((i + 1))
done
for tile in 80x256/1x8x1/6/p/s 64x256/1x8x1/8/p/s 48x256/1x8x1/6/p/s 96x256/1x8x1/4/p/s; do
  MOEQ_TEST_TILES="$tile" timeout 200 "$build/moeq_gpu_tests" --gtest_filter=MoeGemmGpu.PersistentTilesEqualOneTilePerCta \
    >"$out/gpu_tests_$i.txt" 2>&1 &
  i=$((i + 1))
done
wait
echo "gpu tests $(($(date +%s) - t0)) s"
cat "$out"/gpu_tests_*.txt | grep -E "^\[  FAILED|^\[       OK|Failure" | head -20 | cut -c1-160
for who in base new new base; do
  for spec in "gpt-oss-120b mxfp4 1024 1280 2048" "qwen3-30b-a3b mxfp4 512 1024" "qwen3-30b-a3b fp8-block 512" \
              "qwen3-30b-a3b int4-g128 1024"; do
    read -r preset scheme ms <<<"$spec"
    # shellcheck disable=SC2086
    timeout 60 "${bins[$who]}" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" -M $ms \
      --tuning "tuning/sm_90/${preset}_${scheme}.json" >"$out/o.tmp" 2>&1
    grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
  done
  echo "gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; s[k]+=$6; n[k]++; v[k]=v[k]" "$1":"$6} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/gemms.txt" | sort
for who in base new new base; do
  timeout 60 "${bins[$who]}" bench --trials 5 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M 1024 1024 2048 \
    >"$out/o.tmp" 2>&1
  grep -E '^layer  g' "$out/o.tmp" | tail -n +2 | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
done
awk '{k=$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$1":"$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" | sort
echo "done $(($(date +%s) - t0)) s"
