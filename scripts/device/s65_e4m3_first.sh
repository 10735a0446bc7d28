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
# unroll: docs/experiments/2026-12-07-e4m3-persistent-unroll-by-two.patch (persistent e4m3 tiles unrolled by the two
#   fragment sets instead of the 6 stages: SASS 9640 -> 6872 instructions; 11% of the consumers' samples were `no
#   instruction`): its e4m3 tests, then Qwen3 M = 4096 steps E (main) and U (the patch) alternating. Its binaries and
#   kernels: .cache-device-s65-unroll.txz (bin-unroll; extract it beside the first pack). Prediction: -2 to -5%.
# Usage: s65_e4m3_first.sh tests|window|time|unroll|all BUILD   (env OUT, MOEQ_CACHE_DIR)
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
if [ "$mode" = unroll ]; then
  unroll="$(dirname "$build")/bin-unroll"
  timeout 300 "$unroll/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*' \
    >"$out/tests_unroll.txt" 2>&1
  echo "unroll tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests_unroll.txt" | sort -u
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  for who in E U U E E U; do
    echo "$who" >>"$out/steps.txt"
    if [ "$who" = E ]; then layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 E
    else old_build="$unroll" layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 P; fi
  done
  cat "$out/steps.txt"
fi
# sign: the e4m3 decode's sign bytes through an immediate (__byte_perm(0, 0x80, ...)): no constant register
#   rematerialized before each sign PRMT (IMAD 1720 -> 1471 in the st6 kernels, offline). Pack
#   .cache-device-s65-sign.txz (bin-sign and its Qwen3 st6 kernels): its e4m3 tests, then steps E and S alternating.
if [ "$mode" = sign ]; then
  other="$(dirname "$build")/bin-sign"
  timeout 300 "$other/moeq_gpu_tests" --gtest_filter='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*' \
    >"$out/tests_sign.txt" 2>&1
  echo "sign tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests_sign.txt" | sort -u
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  for who in E S S E E S; do
    echo "$who" >>"$out/steps.txt"
    if [ "$who" = E ]; then layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 E
    else old_build="$other" layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 P; fi
  done
  cat "$out/steps.txt"
fi
# diag: bin-sign's steps with MOEQ_DIAG_WS 0, 2 (no dequantization), 8 (no wgmma issued), 10 (neither): what the
#   decode and the MMAs cost inside the e4m3 step (timing only; its kernels are in the sign pack).
if [ "$mode" = diag ]; then
  other="$(dirname "$build")/bin-sign"
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  for d in 0 2 8 10 0; do
    echo "diag $d" >>"$out/steps.txt"
    MOEQ_DIAG_WS=$d old_build="$other" layer_steps "$any" qwen3-30b-a3b mxfp4:fp8-token 4096 P
  done
  cat "$out/steps.txt"
fi
# epi: bin-epi (the decode on both pipes: sign through an immediate, IMAD.IADD / IMAD.HI; and the e4m3 epilogue: row
#   scales from shared memory multiplied in first, the output
#   rows stored with every load first). Pack .cache-device-s65-epi.txz (bin-epi, its Qwen3 st6 kernels for MOEQ_DIAG_WS
#   0, 2, 8). Its e4m3 tests, then steps E (main) and X (bin-epi; S: bin-sign, via EPI_ORDER) in turn, then X's diag steps.
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
