#!/usr/bin/env bash
# GEMM v8's final device call (bench/results/2026-11-30-h200-gemm-v8.md, run 7): warm the kernel
# cache, the GPU tests, the warm-up test, `moeq verify`, then the memory-bound GEMMs of this build
# against a baseline binary in the same call. Expects .dev-bin/ (moeq, moeq_gpu_tests,
# moeq_gpu_warmup_test of this build) and .dev-base/moeq (the baseline, built at its commit), both
# carried; OUT as the device tool sets it.
set -u
export MOEQ_CACHE_DIR=$PWD/.cache-device
t0=$(date +%s)
{ date -u; echo "commit $(cat .dev-var/commit 2>/dev/null)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; } > $OUT/device.txt 2>&1
scripts/device/warm_parallel.sh .dev-bin/moeq 16 > $OUT/warm.txt 2>&1; echo "warm rc=$? $(( $(date +%s) - t0 )) s"
( for p in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do for s in int4-g128 mxfp4 fp8-block; do echo "$p $s"; done; done | xargs -P 9 -L 1 sh -c '.dev-base/moeq compile --arch sm_90a --preset $0 --scheme $1 2>&1 | tail -1; .dev-bin/moeq compile --arch sm_90a --preset $0 --scheme $1 2>&1 | tail -1' > $OUT/warm_base.txt 2>&1 ) &
timeout 300 .dev-bin/moeq_gpu_tests > $OUT/gpu_tests.txt 2>&1; echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/gpu_tests.txt | head; grep -m 10 "Failure" $OUT/gpu_tests.txt
wait
timeout 60 .dev-bin/moeq_gpu_warmup_test > $OUT/warmup.txt 2>&1; echo "warmup rc=$? $(( $(date +%s) - t0 )) s"; tail -1 $OUT/warmup.txt
timeout 90 .dev-bin/moeq verify > $OUT/verify.txt 2>&1; echo "verify rc=$? $(( $(date +%s) - t0 )) s"; tail -1 $OUT/verify.txt; grep FAIL $OUT/verify.txt | head -5
OUT=$OUT TOKENS="1 16 64 256" timeout 120 scripts/device/gemm_compare.sh .dev-base/moeq .dev-bin qwen3-30b-a3b int4-g128 mxfp4 fp8-block
echo "cmp qwen3 $(( $(date +%s) - t0 )) s"
OUT=$OUT TOKENS="16 64" KERNELS="gemm1 gemm2" timeout 60 scripts/device/gemm_compare.sh .dev-base/moeq .dev-bin gpt-oss-120b mxfp4
OUT=$OUT TOKENS="16 64" KERNELS="gemm1 gemm2" timeout 90 scripts/device/gemm_compare.sh .dev-base/moeq .dev-bin deepseek-v3 int4-g128 fp8-block
echo "cmp all $(( $(date +%s) - t0 )) s"
