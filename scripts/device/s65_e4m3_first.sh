#!/usr/bin/env bash
# Written at the end of session 64 for the next session's first call (no device time was left to run it).
# tests: the e4m3 tests, with session 64's review cases (a group lowered by 13 so that narrow and wide tiles alternate
#   under one base per row), which have not run on a GPU yet.
# window: the error of the e4m3 MMA's own accumulation over longer windows (MOEQ_DIAG_E4M3_WINDOW 1, 4, 16), `moeq verify
#   --fp8-wgmma` on the keyless st6 table: Qwen3-30B-A3B (K = 2048: 16 = all of K) at M = 256 / 1024 and DeepSeek-V3
#   (K = 7168) at M = 256. Decides whether 256-token e4m3 tiles without a partial are acceptable (contract: 2e-2).
# time: Qwen3 M = 4096 steps, W1 and W16 alternating, the values path and bf16 around them.
# Pack: .cache-device-s65-first.txz (12 MB, built at the end of session 64 from c371f70's binaries: moeq,
#   moeq_gpu_tests, and for windows 1, 4 and 16 `moeq compile --arch sm_90a --preset P --scheme mxfp4:fp8-token --tuning
#   tables/s64_any_st6.json` for P = qwen3-30b-a3b and deepseek-v3 (the same kernels), plus the Qwen3 mxfp4 layer).
#   Rebuild it if the code changed. Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s65-first.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s65_e4m3_first.sh all .cache-device/bin   (carry: [".cache-device-s65-first.txz"])
# epi (the mode that ran, session 65 calls 13-14): below.
# Usage: s65_e4m3_first.sh tests|window|window16|time|epi|all BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
any="$tables/s64_any_st6.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$mode" = tests ] || [ "$mode" = all ]; then
  tests='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*:Fp8MmaGpu.*'
  timeout 300 "$build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests.txt" | sort -u
fi
if [ "$mode" = window ] || [ "$mode" = all ] || [ "$mode" = window16 ]; then
  windows="1 4 16"
  [ "$mode" = window16 ] && windows=16
  for w in $windows; do
    MOEQ_DIAG_E4M3_WINDOW=$w timeout 150 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
      --fp8-wgmma --codes canonical --tuning "$any" --activation silu -M 256 1024 --layout indexed >"$out/verify_q_w$w.txt" 2>&1
    echo "verify qwen3 W$w rc=$? $(($(date +%s) - t0)) s"
    MOEQ_DIAG_E4M3_WINDOW=$w timeout 200 "$build/moeq" verify --preset deepseek-v3 --scheme mxfp4:fp8-token \
      --fp8-wgmma --codes canonical --tuning "$any" -M 256 --layout indexed >"$out/verify_d_w$w.txt" 2>&1
    echo "verify deepseek W$w rc=$? $(($(date +%s) - t0)) s"
    grep -hE "^(pass|FAIL)" "$out/verify_q_w$w.txt" "$out/verify_d_w$w.txt"
  done
fi
if [ "$mode" = time ] || [ "$mode" = all ]; then
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  for w in 1 16 16 1; do
    echo "W$w" >>"$out/steps.txt"
    MOEQ_DIAG_E4M3_WINDOW=$w layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  done
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  cat "$out/steps.txt"
fi
# epi: bin-epi (the decode on both pipes: sign through an immediate, IMAD.IADD / IMAD.HI; the e4m3 epilogue: row
#   scales from shared memory multiplied in first, the output rows stored with every load first). Pack
#   .cache-device-s65-epi.txz (bin-epi, its Qwen3 st6 kernels for MOEQ_DIAG_WS 0, 2, 8). Its e4m3 tests, then steps
#   E (main) and X (bin-epi) in turn (EPI_ORDER; S: bin-sign of .cache-device-s65-sign.txz), then X's diag steps
#   (EPI_DIAG).
if [ "$mode" = epi ]; then
  epi="$(dirname "$build")/bin-epi" sign="$(dirname "$build")/bin-sign"
  timeout 300 "$epi/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*:Fp8MmaGpu.*' \
    >"$out/tests_epi.txt" 2>&1
  echo "epi tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests_epi.txt" | sort -u
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  for who in ${EPI_ORDER:-E X X E}; do
    echo "$who" >>"$out/steps.txt"
    case $who in
      E) layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 E ;;
      S) old_build="$sign" layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 P ;;
      X) old_build="$epi" layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 P ;;
    esac
  done
  for d in ${EPI_DIAG-2 8}; do
    echo "X diag $d" >>"$out/steps.txt"
    MOEQ_DIAG_WS=$d old_build="$epi" layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 P
  done
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  cat "$out/steps.txt"
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
