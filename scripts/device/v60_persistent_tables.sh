#!/usr/bin/env bash
# Session 29, call 2: the persistent tiles (`/p/s`) in the shipped tables, timed. The whole step with
# each table variant (TABLES/*_s.json: /p/s at the 64-, 80- and 144-row entries) against the shipped
# table, alternating, two rounds, and both GEMMs of the same tiles at the M those entries cover.
# Usage: v60_persistent_tables.sh BUILD TABLES   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$2"
LAYER_TRIALS=7
steps() {  # PRESET SCHEME TABLE M...
  local preset="$1" scheme="$2" table="$3" m
  shift 3
  for m in "$@"; do
    for round in 1 2; do
      if [ "$round" = 1 ]; then
        layer_once shipped "$preset" "$scheme" "$m"; layer_once persistent "$preset" "$scheme" "$m" --tuning "$table"
      else
        layer_once persistent "$preset" "$scheme" "$m" --tuning "$table"; layer_once shipped "$preset" "$scheme" "$m"
      fi
    done
    echo "steps $preset $scheme $m $(($(date +%s) - t0)) s"
  done
}
steps qwen3-30b-a3b mxfp4 "$tables/qwen3_mxfp4_s.json" 512 768 1024 2048 4096
steps qwen3-30b-a3b int4-g128 "$tables/qwen3_int4_s.json" 512 1024 4096
steps gpt-oss-120b mxfp4 "$tables/gptoss_mxfp4_s.json" 1024 2048 4096
cat "$out/layer.txt"
while IFS='|' read -r preset scheme m tiles; do
  [ $(($(date +%s) - t0)) -gt 520 ] && break
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset $preset --scheme $scheme -M $m --tile $tiles \
    >>"$out/bench.txt" 2>&1
  echo "bench $preset $scheme $m rc=$? $(($(date +%s) - t0)) s"
done <<'CASES'
qwen3-30b-a3b|mxfp4|512 768|64x256/1x8x1/8/p 64x256/1x8x1/8/p/s
qwen3-30b-a3b|mxfp4|2048 4096|144x256/1x8x1/4/p 144x256/1x8x1/3/p/s
qwen3-30b-a3b|int4-g128|512 1024|64x256/1x8x1/8/p 64x256/1x8x1/8/p/s 80x256/1x8x1/6/p 80x256/1x8x1/6/p/s
gpt-oss-120b|mxfp4|1024 4096|80x256/1x8x1/6/p 80x256/1x8x1/6/p/s 144x256/1x8x1/4/p 144x256/1x8x1/3/p/s
CASES
grep -E "^gemm[12] " "$out/bench.txt" | awk '{print $1, $2, $3, $4, $5, $12}'
