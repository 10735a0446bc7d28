#!/usr/bin/env bash
# The whole MXFP4 step with 24x256/1x8x1/4/o2/p/t in the shipped tables (session 43 measured only its GEMMs: -10% at
# gpt-oss-120b M = 512, -12% GEMM2 at Qwen3 M = 256; bench/results/2026-12-05-h200-two-ctas.md). Writes each shipped
# table with its (1024, 3072] slot range (M x top_k: gpt-oss-120b M = 257-768, Qwen3-30B-A3B M = 129-384) on that tile,
# then times `moeq bench --kernel layer` shipped / new / shipped / new. Ship the entry where new wins in both pairs.
# Usage: v134_o2_steps.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
for layer in gpt-oss-120b qwen3-30b-a3b; do
  python3 - "$root/tuning/sm_90/${layer}_mxfp4.json" "$out/${layer}_o2.json" <<'PY'
import json, sys
lo, hi, tile = 1024, 3072, "24x256/1x8x1/4/o2/p/t"
table = json.load(open(sys.argv[1]))
entries = []
for e in table["entries"]:
    if e["max_m"] <= lo or e["min_m"] >= hi:
        entries.append(e)
        continue
    if e["min_m"] < lo:
        entries.append(dict(e, max_m=lo))
    if e["max_m"] > hi:
        entries.append(dict(e, min_m=hi))
entries.append({"min_m": lo, "max_m": hi, "block_m": 24, "gemm1_tile": tile, "gemm2_tile": tile})
table["entries"] = sorted(entries, key=lambda e: e["min_m"])
json.dump(table, open(sys.argv[2], "w"), indent=1)
PY
done
for case in "qwen3-30b-a3b 160 256 384" "gpt-oss-120b 384 512 640 768"; do
  set -- $case
  layer=$1
  shift
  # The plans A/B'd, on this device: the new table must move these M onto the tile (keyed by M x top_k).
  "$build/moeq" info --preset "$layer" --scheme mxfp4 -M "$@" >>"$out/plans_shipped.txt" 2>&1
  "$build/moeq" info --preset "$layer" --scheme mxfp4 -M "$@" --tuning "$out/${layer}_o2.json" >>"$out/plans_new.txt" 2>&1
  for t in shipped new shipped new; do
    table=()
    [ $t = new ] && table=(--tuning "$out/${layer}_o2.json")
    timeout 60 "$build/moeq" bench --kernel layer --preset "$layer" --scheme mxfp4 -M "$@" "${table[@]}" --trials 9 \
      >>"$out/layer_$t.txt" 2>&1
    echo "$layer $t rc=$? $(($(date +%s) - t0)) s"
  done
done
grep -hE "^(M = |  gemm)" "$out"/plans_new.txt
grep -hE "^layer " "$out"/layer_*.txt
