#!/usr/bin/env bash
# The chunked routing kernels (route_chunk_count + route_chunk_place, session 28): the routing tests
# (every path bit for bit against the reference, and PrintsTimings: each path's time by M, streamed and
# in graph replay), the ExpertsGpu tests but the quantized-activation pairs, then the whole step with
# this build against BASE_MOEQ (count + scatter at every M above 8 slots), alternating, and ncu's
# graph-node durations of the new step.
# Usage: v56_chunked_routing.sh BUILD BASE_MOEQ   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
timeout 200 "$build/moeq_gpu_tests" --gtest_filter='RoutingGpu.*' >"$out/routing_tests.txt" 2>&1
echo "routing tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" "$out/routing_tests.txt" | head
timeout 170 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.*:-ExpertsGpu.QuantizedActivationPairsMatchOracle' \
  >"$out/experts_tests.txt" 2>&1
echo "experts tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|^\[       OK" "$out/experts_tests.txt" | head -20
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup test rc=$? $(($(date +%s) - t0)) s"
tail -1 "$out/warmup.txt"
export LAYER_TRIALS=7
for c in "qwen3-30b-a3b mxfp4 4096" "qwen3-30b-a3b mxfp4 1024" "qwen3-30b-a3b mxfp4 256" "gpt-oss-120b mxfp4 2048" \
         "deepseek-v3 mxfp4 4096"; do
  set -- $c
  for round in 1 2; do
    layer_once new "$1" "$2" "$3"
    timeout 60 "$base_moeq" bench --trials 7 --kernel layer --preset "$1" --scheme "$2" -M "$3" "$3" >"$out/l.tmp" 2>&1
    echo "base $1 $2 $3 rc=$? $(grep -E '^layer  ' "$out/l.tmp" | awk '{print $5}' | paste -sd' ')" >>"$out/layer.txt"
  done
  echo "$c $(($(date +%s) - t0)) s"
done
cat "$out/layer.txt"
f="$out/nodes-qwen3-4096.txt"
timeout 100 ncu --clock-control none --cache-control none --graph-profiling node -k regex:moeq_ -c 12 \
  --metrics gpu__time_duration.sum "$build/moeq" bench --trials 1 --iterations 2 --kernel layer \
  --preset qwen3-30b-a3b --scheme mxfp4 -M 4096 >"$f" 2>&1
echo "ncu rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" | paste -sd' ')"
