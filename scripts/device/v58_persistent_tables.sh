#!/usr/bin/env bash
# Persistent tiles, second call (session 28): the bit-identity test with its float64 checks trimmed and the
# experts step on persistent tiles (after the max_m_blocks cap), GEMM
# sweeps where 64- and 80-row blocks run short K loops (Qwen3-30B-A3B GEMM2, K = 768), and the whole step
# with the shipped Qwen3 MXFP4 table (persistent tiles at M = 1024 and GEMM2 at M = 2048-4096) against
# session 27's table, alternating.
# Usage: v58_persistent_tables.sh BUILD OLD_TABLE   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_table="$2"
gpu_tests "" 'MoeGemmGpu.PersistentTiles*:ExpertsGpu.PersistentTiles*' 200
grep -E "^\[       OK|Failure|FAILED" "$out/gpu_tests.txt" | head -20
for round in 1 2; do
  for layer_table in new old; do
    flags=()
    [ "$layer_table" = old ] && flags=(--tuning "$old_table")
    before=$(grep -c "^layer  " "$out/layer.txt" 2>/dev/null)
    timeout 90 "$build/moeq" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 -M 1024 1024 4096 \
      "${flags[@]}" >>"$out/layer.txt" 2>&1
    echo "layer $round $layer_table rc=$? $(($(date +%s) - t0)) s: $(grep -E '^layer  ' "$out/layer.txt" |
      tail -n +$((${before:-0} + 1)) | awk '{print $4, $5}' | paste -sd' ')"
  done
done
while IFS='|' read -r preset scheme m tiles; do
  # shellcheck disable=SC2086
  timeout 100 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset $preset --scheme $scheme -M $m --tile $tiles \
    >>"$out/bench.txt" 2>&1
  echo "bench $preset $scheme $m rc=$? $(($(date +%s) - t0)) s"
done <<'CASES'
qwen3-30b-a3b|mxfp4|512 768|64x256/1x8x1/6/p 64x256/1x8x1/8/p 64x256/1x8x1/6/p/s 64x256/1x8x1/8/p/s
qwen3-30b-a3b|int4-g128|1024|64x256/1x8x1/8/p 64x256/1x8x1/8/p/s 80x256/1x8x1/6/p 80x256/1x8x1/6/p/s
CASES
grep -E "^gemm[12] " "$out/bench.txt" | awk '{print $1, $2, $3, $4, $5, $12}'
