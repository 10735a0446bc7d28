#!/usr/bin/env bash
# First device call for branch exp/v8-mxfp4-layout: correctness of the moved e2m1 bits (GEMM
# tests on the planner's tiles for every scheme, the experts tests, `moeq verify`), then MXFP4
# and NVFP4 GEMM speed against main's binary in the same call.
# Expects .dev-bin/ (this branch's moeq, moeq_gpu_tests) and .dev-base/moeq (main) carried.
set -u
export MOEQ_CACHE_DIR=$PWD/.cache-device
t0=$(date +%s)
scripts/device/warm_parallel.sh .dev-bin/moeq 16 > $OUT/warm.txt 2>&1; echo "warm rc=$? $(( $(date +%s) - t0 )) s"
timeout 330 .dev-bin/moeq_gpu_tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s"
grep -E "^\[  (PASSED|FAILED) " $OUT/gpu_tests.txt; grep -m 10 "Failure" $OUT/gpu_tests.txt
timeout 90 .dev-bin/moeq verify > $OUT/verify.txt 2>&1; echo "verify rc=$?"; tail -1 $OUT/verify.txt
for s in mxfp4 nvfp4; do echo "qwen3-30b-a3b $s"; done | xargs -P 2 -L 1 sh -c '.dev-base/moeq compile --arch sm_90a --preset $0 --scheme $1 | tail -1'
OUT=$OUT TOKENS="16 64 256 4096" timeout 150 scripts/device/gemm_compare.sh .dev-base/moeq .dev-bin qwen3-30b-a3b mxfp4 nvfp4
echo "cmp $(( $(date +%s) - t0 )) s"
