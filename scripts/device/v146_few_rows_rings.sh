#!/usr/bin/env bash
# Session 48: the few-rows direct (/r) tiles at M = 1-2, where a layer streams only a few experts' weights and too
# few loads may be in flight per SM. Mixtral-8x7B MXFP4 M = 1 GEMM2 (8x32/1x1x4/4/o4/r, 256 CTAs over K = 14336)
# streams 62 MB at 58% of copy (H100), while FP8-block on the same tile (twice the bytes per lane and stage) reaches
# 82%: deeper register rings (6, 8), more K-group warps (1x2x4) and wider warps (8x64/1x1x4) hold more bytes in flight.
# GEMM1 M = 1 and the other presets' M = 1 GEMMs with the same variants. Timing only (bench --tile).
# Usage: v146_few_rows_rings.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
narrow="8x32/1x1x4/4/o4/r 8x32/1x1x4/2/r 8x32/1x1x4/6/r 8x32/1x1x4/8/r 8x32/1x1x4/8/o4/r 8x32/1x2x4/4/r 8x32/1x2x4/8/r
8x64/1x1x4/4/r 8x64/1x2x2/4/r 8x64/1x2x2/8/r"
wide="8x256/1x8x1/4/r 8x256/1x8x1/6/r 8x256/1x8x1/8/r 8x128/1x4x1/4/r 8x128/1x4x1/8/r 8x64/1x2x2/4/r 8x64/1x2x2/8/r"
int4="8x64/1x2x2/4/r 8x64/1x2x2/8/r 8x64/1x1x4/4/r 8x128/1x4x1/4/o4/r 8x128/1x4x1/8/r 8x32/1x1x4/8/r 8x32/1x1x4/4/o4/r"
# shellcheck disable=SC2086
all_mx=$(echo $narrow $wide | tr ' ' '\n' | sort -u | tr '\n' ' ')
warm_tiles "mxfp4" "$all_mx" "mixtral-8x7b gpt-oss-120b qwen3-30b-a3b"
warm_tiles "int4-g128" "$int4" "deepseek-v3"
grep -ci "error\|illegal\|not " "$out/warm.txt"; grep -i "error\|illegal" "$out/warm.txt" | head -5
# bench PRESET SCHEME KERNEL "M ..." "TILE ...": one process into bench.txt
bench() {
  # shellcheck disable=SC2086
  timeout 120 "$build/moeq" bench --trials 7 --kernel "$3" --preset "$1" --scheme "$2" -M $4 --tile $5 >>"$out/bench.txt" 2>&1
  echo "bench $1 $2 $3 M=$4 rc=$? $(($(date +%s) - t0)) s"
}
bench mixtral-8x7b mxfp4 gemm2 "1 2" "$narrow"
bench mixtral-8x7b mxfp4 gemm1 "1" "$wide"
bench mixtral-8x7b mxfp4 gemm2 "1 2" "$narrow"
bench gpt-oss-120b mxfp4 gemm2 "1" "$narrow"
bench qwen3-30b-a3b mxfp4 gemm1 "1" "$narrow"
bench qwen3-30b-a3b mxfp4 gemm2 "1" "$narrow"
bench deepseek-v3 int4-g128 gemm1 "1" "$int4"
bench deepseek-v3 int4-g128 gemm2 "1" "$int4"
grep -E "^(gemm1|gemm2) " "$out/bench.txt" | head -3
echo "done $(($(date +%s) - t0)) s"
