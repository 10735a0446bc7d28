#!/usr/bin/env bash
# GPU evidence in one call on the device machine (the `device` tool runs it in the repository
# root with the build folder carried): GPU tests, cold and warm kernel compiles, kernel
# benchmarks against the copy bandwidth. Everything lands in $OUT for bench/results/.
set -u
build="${1:-build}"
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
export MOEQ_CACHE_DIR="$(mktemp -d)"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  echo "commit ${MOEQ_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

# Cold compile (fresh cache dir), then the same kernels from the disk cache in a new process.
"$build/moeq" compile --preset qwen3-30b-a3b --scheme mxfp4:fp8-token >"$out/compile_cold.txt" 2>&1
"$build/moeq" compile --preset qwen3-30b-a3b --scheme mxfp4:fp8-token >"$out/compile_warm.txt" 2>&1
tail -1 "$out/compile_cold.txt"; tail -1 "$out/compile_warm.txt"

"$build/moeq_gpu_tests" >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/gpu_tests.txt" | head -20
# Its own process: nothing may be loaded before Experts::warm_up.
"$build/moeq_gpu_warmup_test" >"$out/gpu_warmup_test.txt" 2>&1
echo "gpu warm-up test rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/gpu_warmup_test.txt"

shift || true
"$build/moeq" bench "$@" >"$out/bench.txt" 2>&1
echo "bench rc=$?"; cat "$out/bench.txt"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader >>"$out/device.txt" 2>&1

"$build/moeq" run --preset tiny --tokens 7 >"$out/run_auto.txt" 2>&1
head -2 "$out/run_auto.txt"
