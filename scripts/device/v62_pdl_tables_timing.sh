#!/usr/bin/env bash
# Session 29, call B (timings): the experts step with programmatic dependent launch against MOEQ_PDL=0;
# the persistent tiles (`/p/s`) in the tables (TABLES/*_s.json) against the shipped ones; FP8 per-token
# activations against bf16 (issue 5); both GEMMs of the persistent tiles against their twins. Each
# comparison alternates its two sides over two rounds, one process per side and round, each process
# timing its first M twice (the first layer a process times runs slow).
# Usage: v62_pdl_tables_timing.sh BUILD TABLES   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$2"
# The two checks call A's deadline cut (the routing timings test, the warm-up test).
timeout 60 "$build/moeq_gpu_tests" --gtest_filter='RoutingGpu.PrintsTimings' >"$out/routing_timings.txt" 2>&1
echo "routing timings test rc=$? $(($(date +%s) - t0)) s"
timeout 120 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) " "$out/routing_timings.txt" "$out/warmup.txt"
ab pdl nopdl qwen3-30b-a3b mxfp4 "1 16 64 256 1024 4096" "" "MOEQ_PDL=0"
ab pdl nopdl qwen3-30b-a3b int4-g128 "1 16 256" "" "MOEQ_PDL=0"
ab pdl nopdl gpt-oss-120b mxfp4 "1 16 256 2048" "" "MOEQ_PDL=0"
ab persistent shipped qwen3-30b-a3b mxfp4 "512 768 1024 2048 4096" "--tuning $tables/qwen3_mxfp4_s.json" ""
ab persistent shipped qwen3-30b-a3b int4-g128 "512 1024 4096" "--tuning $tables/qwen3_int4_s.json" ""
ab persistent shipped gpt-oss-120b mxfp4 "1024 2048 4096" "--tuning $tables/gptoss_mxfp4_s.json" ""
for m in 16 256 4096; do
  [ $(($(date +%s) - t0)) -gt 500 ] && break
  for ps in "qwen3-30b-a3b mxfp4 mxfp4:fp8-token" "deepseek-v3 fp8-block fp8-block:fp8-token"; do
    # shellcheck disable=SC2086
    set -- $ps
    timeout 40 "$build/moeq" bench --trials 7 --kernel layer --preset "$1" --scheme "$2" "$3" "$2" "$3" -M "$m" \
      >>"$out/fp8_step.txt" 2>&1
  done
  echo "fp8 M=$m $(($(date +%s) - t0)) s"
done
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt" | head -150
grep -E "^layer " "$out/fp8_step.txt" | awk '{print $2, $3, $4, $5}'
while IFS='|' read -r preset scheme m tiles; do
  [ $(($(date +%s) - t0)) -gt 540 ] && break
  # shellcheck disable=SC2086
  timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 --preset $preset --scheme $scheme -M $m --tile $tiles \
    >>"$out/bench.txt" 2>&1
  echo "bench $preset $scheme $m rc=$? $(($(date +%s) - t0)) s"
done <<'CASES'
qwen3-30b-a3b|mxfp4|512 768|64x256/1x8x1/8/p 64x256/1x8x1/8/p/s
qwen3-30b-a3b|mxfp4|2048 4096|144x256/1x8x1/4/p 144x256/1x8x1/3/p/s
gpt-oss-120b|mxfp4|1024 4096|80x256/1x8x1/6/p 80x256/1x8x1/6/p/s 144x256/1x8x1/4/p 144x256/1x8x1/3/p/s
CASES
grep -E "^gemm[12] " "$out/bench.txt" | awk '{print $1, $2, $3, $4, $5, $12}'
