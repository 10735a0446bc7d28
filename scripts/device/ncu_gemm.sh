#!/usr/bin/env bash
# Nsight Compute profile of one GEMM launch per case, in one device call (the device machine runs
# Firecracker, where ncu reads the counters; --clock-control none leaves the clocks alone, as
# the device METHOD asks). Each case is "PRESET SCHEME M KERNEL [TILE]" (KERNEL gemm1 or gemm2;
# TILE a `moeq bench --tile` candidate, else the planner's). SASS=1 also writes the per-instruction
# source page (stall samples per SASS line) as ncu_..._sass.csv.
# Usage: ncu_gemm.sh MOEQ "qwen3-30b-a3b int4-g128 4096 gemm1" ...   (env OUT: where text lands)
set -u
moeq="$1"
shift
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
for spec in "$@"; do
  read -r preset scheme m kernel tile <<<"$spec"
  tile_args=()
  [ -n "$tile" ] && tile_args=(--tile "$tile")
  name="ncu_${preset}_${scheme}_${m}_${kernel}$(echo "${tile:+_$tile}" | tr '/' '-')"
  # NOTE: skip the warm-up launches; the bench replays a graph of the same kernel afterwards.
  timeout 240 ncu --clock-control none --print-details all -k regex:'^moeq_moe_gemm$' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section SourceCounters \
    "$moeq" bench --kernel "$kernel" --preset "$preset" --scheme "$scheme" --tokens "$m" --trials 1 \
    --iterations 2 "${tile_args[@]}" >"$out/$name.txt" 2>&1
  echo "ncu $spec rc=$?"
  if [ "${SASS:-0}" = 1 ]; then
    timeout 240 ncu --clock-control none -k regex:'^moeq_moe_gemm$' --launch-skip 3 --launch-count 1 \
      --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
      "$moeq" bench --kernel "$kernel" --preset "$preset" --scheme "$scheme" --tokens "$m" --trials 1 \
      --iterations 2 "${tile_args[@]}" >"$out/${name}_sass.csv" 2>&1
    echo "ncu sass $spec rc=$?"
  fi
done
