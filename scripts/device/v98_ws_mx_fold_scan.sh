#!/usr/bin/env bash
# Session 35, call 3: the folded MXFP4 multiplier decided once per output tile and consumer warpgroup
# (MxFoldScan before the K loop, one ring per path), after call 2 showed the in-loop vote costing more
# than it saved. Tests of the warp-specialized tiles (one process per tile, in parallel); GEMMs alone and
# steps B N N B against 20ec1f7 on the four MXFP4 layers; then issue 6's side by side (moeq, Humming 0.1.20,
# cuBLAS bf16) as in v93_anchors_ws_scales.sh.
# Usage: v98_ws_mx_fold_scan.sh BUILD BASE_MOEQ HUMMING_CACHE_TXZ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
declare -A bins=([base]="$2" [new]="$build/moeq")
root="$(cd "$(dirname "$0")/../.." && pwd)"
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
  for spec in "gpt-oss-120b mxfp4 1024 2048 4096" "qwen3-30b-a3b mxfp4 1024 2048 4096" "gpt-oss-20b mxfp4 1024 4096" \
    "deepseek-v3 mxfp4 1024 4096"; do
    read -r preset scheme ms <<<"$spec"
    # shellcheck disable=SC2086
    timeout 60 "${bins[$who]}" bench --trials 5 --kernel gemm1 gemm2 --preset "$preset" --scheme "$scheme" -M $ms \
      --tuning "$root/tuning/sm_90/${preset}_${scheme}.json" >"$out/o.tmp" 2>&1
    grep -E '^gemm[12] ' "$out/o.tmp" | awk -v s="$who" '{print s, $1, $2, $3, $4, $5}' >>"$out/gemms.txt"
  done
  echo "rc=$? gemms $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4" "$5; s[k]+=$6; n[k]++; v[k]=v[k]" "$1":"$6} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/gemms.txt" | sort
for who in base new new base; do
  timeout 100 "${bins[$who]}" bench --trials 5 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 \
    -M 1024 2048 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gq]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  timeout 100 "${bins[$who]}" bench --trials 5 --kernel layer --preset gpt-oss-20b deepseek-v3 --scheme mxfp4 \
    -M 1024 4096 >"$out/o.tmp" 2>&1
  grep -E '^layer  [gd]' "$out/o.tmp" | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/steps.txt"
  echo "rc=$? steps $who $(($(date +%s) - t0)) s"
done
awk '{k=$2" "$3" "$4; s[k]+=$5; n[k]++; v[k]=v[k]" "$1":"$5} END {for (k in s) printf "%s mean %.2f:%s\n", k, s[k]/n[k], v[k]}' "$out/steps.txt" | sort
# Issue 6's side by side, the new binary (v93_anchors_ws_scales.sh's steps).
tar xJf "$3" -C /tmp
tokens=(1024 2048 4096)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for preset in gpt-oss-120b qwen3-30b-a3b; do
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$preset" --scheme mxfp4 -M "${tokens[@]}" \
    --tuning "$root/tuning/sm_90/${preset}_mxfp4.json" >>"$out/moeq_bench.txt" 2>&1
done
timeout 120 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b qwen3-30b-a3b --scheme mxfp4 \
  -M 1024 "${tokens[@]}" >"$out/moeq_layer.txt" 2>&1
echo "moeq anchors rc=$? $(($(date +%s) - t0)) s"
grep -E "^copy|^gemm[12] |^layer  [gq]" "$out/moeq_bench.txt" "$out/moeq_layer.txt" | cut -d: -f2- | cut -c1-110
timeout 60 python3 "$root/bench/anchors/cublas_bf16.py" --preset qwen3-30b-a3b gpt-oss-120b --tokens "${tokens[@]}" \
  >"$out/cublas.txt" 2>&1
echo "cublas rc=$? $(($(date +%s) - t0)) s"
tail -n 12 "$out/cublas.txt"
mkdir -p "$out/humming_gemms" "$out/humming_layer"
HUMMING_TIMEOUT=150 OUT="$out/humming_gemms" bash "$root/scripts/device/humming_anchor.sh" --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens "${tokens[@]}" >"$out/humming_gemms/log.txt" 2>&1
echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
grep -E "gemm[12]" "$out/humming_gemms/humming.txt" | head -20 | cut -c1-160
left=$((580 - ($(date +%s) - t0)))
HUMMING_TIMEOUT=$left OUT="$out/humming_layer" bash "$root/scripts/device/humming_anchor.sh" --layer --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens "${tokens[@]}" >"$out/humming_layer/log.txt" 2>&1
echo "humming layer rc=$? $(($(date +%s) - t0)) s"
tail -n 20 "$out/humming_layer/humming.txt" | cut -c1-160
echo "done $(($(date +%s) - t0)) s"
