#!/usr/bin/env bash
# Session 30, call 4: the 48-row warp-specialized tiles. GPU tests on them (every tile candidate's scheme
# list, the persistent one bit for bit against one tile per CTA), Experts::apply with block_m = 48 against
# the reference, then GEMM1 / GEMM2 against the 64-row tiles the shipped tables run at ~24-40 rows per
# expert (gpt-oss-120b M = 768-1280, Qwen3-30B-A3B M = 384-640).
# Usage: v66_block48.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
t48="48x256/1x8x1/8/p 48x256/1x8x1/6/p 48x256/1x8x1/6/p/s 48x128/1x4x1/4"
gpu_tests "$t48" 'MoeGemmGpu.EveryTileCandidate*:MoeGemmGpu.PersistentTiles*' 200
{
  for s in mxfp4 int4-g128 fp8-block; do
    timeout 60 "$build/moeq" run --preset qwen3-30b-a3b --scheme $s --tokens 61 --block-m 48 --check 2>&1 | tail -2
  done
  timeout 60 "$build/moeq" run --preset gpt-oss-120b --scheme mxfp4 --tokens 45 --block-m 48 --check 2>&1 | tail -2
} >"$out/run_check.txt" 2>&1
echo "run checks $(($(date +%s) - t0)) s"
cat "$out/run_check.txt"
sweep="48x256/1x8x1/8/p 48x256/1x8x1/6/p 48x256/1x8x1/6/p/s 48x256/1x8x1/4/p 64x256/1x8x1/8/p 64x256/1x8x1/8/p/s"
bench_tile_cases "$sweep" "gpt-oss-120b mxfp4 768 1024 1280" "qwen3-30b-a3b mxfp4 384 512 640" "qwen3-30b-a3b int4-g128 384 512 640"
grep -E "^gemm[12]" "$out/sweep.txt" | awk '{print $1, $2, $3, $4, $5, $12}'
