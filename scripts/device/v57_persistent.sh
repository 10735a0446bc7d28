#!/usr/bin/env bash
# Persistent warp-specialized tiles (`/p/s`, session 28): the GEMM tests on them (bit-identical to one tile
# per CTA with 1 to 7 CTAs looping over the tiles, every tile candidate test, the experts step on them), the
# warm-up test, then GEMM1 / GEMM2 of each persistent tile against its one-tile-per-CTA twin in the same
# process, twice, where the planner runs 80-, 128- and 144-row blocks.
# Usage: v57_persistent.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tiles="80x256/1x8x1/5/p/s 128x256/1x8x1/3/p/s 64x256/1x8x1/6/p/s 96x256/1x8x1/4/p/s"
gpu_tests "$tiles" 'MoeGemmGpu.PersistentTiles*:MoeGemmGpu.EveryTile*:ExpertsGpu.PersistentTiles*' 240
grep -E "^\[       OK|Failure|FAILED" "$out/gpu_tests.txt" | head -20
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup test rc=$? $(($(date +%s) - t0)) s"
tail -1 "$out/warmup.txt"
for round in 1 2; do
  while IFS='|' read -r preset scheme m tiles; do
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset $preset --scheme $scheme -M $m --tile $tiles \
      >>"$out/bench.txt" 2>&1
    echo "bench $round $preset $scheme $m rc=$? $(($(date +%s) - t0)) s"
  done <<'CASES'
gpt-oss-120b|mxfp4|2048|80x256/1x8x1/6/p 80x256/1x8x1/6/p/s 80x256/1x8x1/5/p/s
qwen3-30b-a3b|mxfp4|4096|144x256/1x8x1/4/p 144x256/1x8x1/3/p/s 128x256/1x8x1/4/p/s
qwen3-30b-a3b|mxfp4|1024|80x256/1x8x1/6/p 80x256/1x8x1/6/p/s
gpt-oss-120b|mxfp4|4096|144x256/1x8x1/4/p 144x256/1x8x1/3/p/s 128x256/1x8x1/4/p/s
qwen3-30b-a3b|int4-g128|4096|144x256/1x8x1/4/p 144x256/1x8x1/3/p/s 128x256/1x8x1/4/p/s
CASES
done
grep -E "^gemm" "$out/bench.txt"
