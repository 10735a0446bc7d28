#!/usr/bin/env bash
# Session 34, call 3: where the warp-specialized tile's K-tile time goes (issue 6's losses: gpt-oss-120b
# M = 1024 and 2048, Qwen3-30B-A3B M = 4096). Nsight Compute of one GEMM2 launch per case with the SASS
# source page (stall samples per instruction), the top instructions by samples, and the warp-state summary.
# Usage: v91_ws_stalls.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
here="$(dirname "$0")"
SASS=1 OUT="$out" "$here/ncu_gemm.sh" "$build/moeq" "gpt-oss-120b mxfp4 1024 gemm2 48x256/1x8x1/6/p/s" \
  "qwen3-30b-a3b mxfp4 4096 gemm2 144x256/1x8x1/3/p/s" "gpt-oss-120b mxfp4 2048 gemm2 80x256/1x8x1/6/p/s"
echo "ncu $(($(date +%s) - t0)) s"
for f in "$out"/ncu_*_sass.csv; do
  echo "== $f"
  python3 "$here/ncu_source_top.py" 45 <"$f" | cut -c1-150
done
for f in "$out"/ncu_*.txt; do
  echo "== $f"
  grep -E "Duration|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Registers Per|Stall" "$f" | head -30
done
echo "done $(($(date +%s) - t0)) s"
