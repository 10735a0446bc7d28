#!/usr/bin/env bash
# Session 66, issue 5 at M = 4096. Two builds: bin-base (main at 2ac32fa: the diagnostics and the window errors of
# the 128-channel e4m3 body) and bin (2ac32fa with docs/experiments/2026-12-07-e4m3-256-channel-whole-k.patch: the
# 256-channel e4m3 tile that accumulates over all of K, tables/s66_e4m3_whole_k.json). Ran in session 66 (H100).
# diag (bin-base): Qwen3 M = 4096 e4m3 steps on the st6 table with MOEQ_DIAG_WS 0, 8 (no wgmma), 10 (and no
#   dequantization), 24 (no wgmma, no token copies), 40 (no wgmma, no code copies), 56 (no wgmma, no copies), then the
#   values path and bf16 (timing only: the diagnostic results are wrong).
# window (bin-base): `moeq verify` errors at Qwen3 M = 256 / 1024 with windows of 1 and 16 K tiles (16: all of
#   GEMM1's K = 2048 and GEMM2's 768), and the values path's.
# whole (bin): the e4m3 GPU tests (the 256-channel tiles among them), verify on the whole-K table (Qwen3 M = 256 /
#   1024, DeepSeek-V3 M = 256), then Qwen3 M = 4096 steps: whole-K (W, bin), st6 (E, bin-base), the values path and
#   bf16 (N, bin-base), in turn.
# Pack: .cache-device-s66d.txz (bin, bin-base and the kernels they run here). Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66d.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66_e4m3_whole_k.sh all .cache-device/bin   (carry: [".cache-device-s66d.txz"])
# Usage: s66_e4m3_whole_k.sh diag|window|whole|all BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
st6="$tables/s64_any_st6.json" whole="$tables/s66_e4m3_whole_k.json"
new_build="$build" base_build="$(dirname "$build")/bin-base"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export STEP_TIMEOUT=150 STEP_CODES=canonical
if [ "$mode" = whole ] || [ "$mode" = all ]; then
  tests='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*:Fp8MmaGpu.*'
  timeout 300 "$new_build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests.txt" | sort -u
  for job in "qwen3-30b-a3b 256 1024" "deepseek-v3 256"; do
    set -- $job
    timeout 200 "$new_build/moeq" verify --preset "$1" --scheme mxfp4:fp8-token --fp8-wgmma --codes canonical \
      --tuning "$whole" -M "${@:2}" --layout indexed >"$out/verify_whole_$1.txt" 2>&1
    echo "verify whole $1 rc=$? $(($(date +%s) - t0)) s"
    grep -hE "^(pass|FAIL)" "$out/verify_whole_$1.txt"
  done
  # W: bin on the whole-K table; E: bin-base on st6 (main's e4m3 body); N: bin-base's values path and bf16.
  old_build="$base_build"
  for who in W E N W E N; do
    echo "$who" >>"$out/steps.txt"
    case "$who" in
      W) layer_steps "$whole" qwen3-30b-a3b mxfp4:fp8-token 4096 E ;;
      E) layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P ;;
      N) build="$base_build" && qwen3_baseline_steps && build="$new_build" ;;
    esac
  done
  # W_DIAG: MOEQ_DIAG_WS values for W steps after the rest (timing only), e.g. 8 (no wgmma issued).
  # shellcheck disable=SC2086
  diag_steps "$whole" E W ${W_DIAG:-}
  cat "$out/steps.txt"
fi
if [ "$mode" = window ] || [ "$mode" = all ]; then
  # NOTE: W1 is the default: no MOEQ_DIAG_E4M3_WINDOW (naming it makes another kernel source, not in the pack).
  for w in 1 16 values; do
    flags=(--fp8-wgmma)
    window=()
    if [ "$w" = values ]; then flags=(); fi
    if [ "$w" = 16 ]; then window=(MOEQ_DIAG_E4M3_WINDOW=16); fi
    env "${window[@]}" timeout 150 "$base_build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
      "${flags[@]}" --codes canonical --tuning "$st6" -M 256 1024 --layout indexed >"$out/verify_q_w$w.txt" 2>&1
    echo "verify qwen3 W$w rc=$? $(($(date +%s) - t0)) s"
    grep -hE "^(pass|FAIL)" "$out/verify_q_w$w.txt"
  done
fi
if [ "$mode" = diag ] || [ "$mode" = all ]; then
  build="$base_build"
  diag_steps "$st6" E E 0 8 10 24 40 56 0
  qwen3_baseline_steps
  cat "$out/steps.txt"
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
