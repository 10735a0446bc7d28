#!/usr/bin/env bash
# Session 39, call 4: (1) moeq's GEMMs on the shipped tables' tiles and Humming's GEMMs in one call (MXFP4,
# gpt-oss-120b and Qwen3-30B-A3B, M = 512-4096; call 3 timed moeq's GEMMs on the planner's tiles); (2) where
# gpt-oss-120b's step spends beyond its GEMMs at M = 1024 and 2048: each kernel left out in turn (MOEQ_DIAG_OMIT,
# timing only), forward then reverse; (3) `moeq tune --update` of gpt-oss-120b's table at M = 1024-2048 with the
# `/t` candidates (the deeper rings `/t` leaves room for).
# Usage: v115_gemms_omit_tune.sh BUILD HUMMING_CACHE_TXZ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tar xJf "$2" -C /tmp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
for preset in gpt-oss-120b qwen3-30b-a3b; do
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset "$preset" --scheme mxfp4 -M 512 1024 2048 4096 \
    --tuning "$root/tuning/sm_90/${preset}_mxfp4.json" >>"$out/moeq_bench.txt" 2>&1
  echo "moeq gemms $preset rc=$? $(($(date +%s) - t0)) s"
done
grep -E "^copy|^gemm[12] " "$out/moeq_bench.txt" | cut -c1-160
mkdir -p "$out/humming_gemms"
HUMMING_TIMEOUT=150 OUT="$out/humming_gemms" bash "$root/scripts/device/humming_anchor.sh" --preset gpt-oss-120b \
  qwen3-30b-a3b --scheme mxfp4 --tokens 512 1024 2048 4096 >"$out/humming_gemms/log.txt" 2>&1
echo "humming gemms rc=$? $(($(date +%s) - t0)) s"
grep -E "^gemm[12]" "$out/humming_gemms/humming.txt" | cut -c1-110
settings=(none moeq_moe_gemm@0%2 moeq_moe_gemm@1%2 moeq_activation moeq_topk_reduce moeq_order_rows_for_mma)
order=("${settings[@]}")
for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[$i]}"); done
for s in "${order[@]}"; do
  omit="$s"
  [ "$s" = none ] && omit=""
  MOEQ_DIAG_OMIT="$omit" timeout 60 "$build/moeq" bench --trials 7 --kernel layer --preset gpt-oss-120b --scheme mxfp4 \
    -M 1024 1024 2048 >"$out/o.tmp" 2>&1
  echo "rc=$? omit=$s $(($(date +%s) - t0)) s"
  grep -E '^layer  gpt' "$out/o.tmp" | awk -v s="$s" '{print s, $4, $5}' >>"$out/omit.txt"
done
sort -k2,2n -k1,1 "$out/omit.txt"
TUNE_TIMEOUT=200 tune_update_tables "gpt-oss-120b:1024,1536,2048:48x512/1x8x1/4/p/t,48x512/1x8x1/6/p/t,48x256/1x8x1/8/p/t,48x256/1x8x1/6/p/s/t,64x256/1x8x1/8/p/t,80x256/1x8x1/6/p/t,80x256/1x8x1/8/p/t,80x256/1x8x1/6/p/s/t,80x256/1x8x1/8/p/s/t"
echo "done $(($(date +%s) - t0)) s"
