#!/usr/bin/env bash
# Session 67, issue 5 at M = 4096: main's e4m3 consumers with ping-pong (MOEQ_DIAG_WS=256: the two consumer
# warpgroups take turns issuing their MMAs; results unchanged) against without, on the st6 table, beside the values
# path and bf16. The wgmma mix probe said integer work in the consumer warps barely overlaps their own e4m3 MMAs
# (bench/results/2026-12-07-h100-s67-wgmma-probes.md).
# BUILD must be built with docs/experiments/2026-12-07-e4m3-ping-pong.patch applied (it adds MOEQ_DIAG_WS 256), best
# with docs/experiments/2026-12-07-wgmma-decode-warpgroup-probe.patch over it (the probe's decode-warpgroup rows).
# Written in session 67; never ran (no device time was left to start a machine).
# Device command (carry: ["build"]): OUT=$OUT bash scripts/device/s67_ping_pong.sh short build
# short: the probes, verify and steps with and without ping-pong (~4 min); tests: the five e4m3 GPU tests with it;
# w: the 256-channel patch on non-persistent tiles. Each mode is described where it runs.
# Usage: s67_ping_pong.sh short|tests|w BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
e4m3_script_setup "$2"
if [ "$mode" = w ]; then
  # The 256-channel patch on a table of non-persistent tiles (tables/s67_e4m3_whole_k_np.json): its persistent tile,
  # which session 66 timed, had every wgmma serialized by ptxas (C7512, 408 bytes spilled); the non-persistent one
  # spills 84 and serializes nothing (offline, nvcc 13.0). BUILD/s67w: a build of main with
  # docs/experiments/2026-12-07-e4m3-256-channel-whole-k.patch (its moeq and moeq_gpu_tests).
  np="$(cd "$(dirname "$0")" && pwd)/tables/s67_e4m3_whole_k_np.json"
  "$build/s67w/moeq" compile -j 8 --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --tuning "$np" >"$out/compile_wnp.txt" 2>&1 &
  "$build/moeq" compile -j 8 --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --tuning "$st6" >"$out/compile_e.txt" 2>&1 &
  wait
  grep -h "serialized" "$out"/compile_*.txt
  timeout 100 "$build/s67w/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma --codes canonical \
    --tuning "$np" -M 256 --layout indexed >"$out/verify_wnp.txt" 2>&1
  echo "verify W np rc=$? $(($(date +%s) - t0)) s"
  grep -hE "^(pass|FAIL)" "$out/verify_wnp.txt"
  main_build="$build"
  for round in 1 2; do
    build="$build/s67w" && layer_steps "$np" qwen3-30b-a3b mxfp4:fp8-token 4096 E && build="$main_build"
    layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  done
  qwen3_baseline_steps
  cat "$out/steps.txt"
  exit 0
fi
if [ "$mode" = short ]; then
  # One short call (little device time left): main's body with and without ping-pong, verify with it at M = 256,
  # beside the values path and bf16. No GPU tests.
  # NOTE: W (the 256-channel patch) with ping-pong is not run: offline (nvcc 13.0) its persistent 128x256 tile spilled
  # 412 bytes and ptxas serialized every wgmma (C7512), its 4-stage one spilled 80.
  for d in 0 256; do
    MOEQ_DIAG_WS=$d "$build/moeq" compile -j 8 --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --tuning "$st6" \
      >"$out/compile_$d.txt" 2>&1 &
  done
  wait
  "$build/moeq" compile -j 16 --preset qwen3-30b-a3b --scheme mxfp4 >"$out/compile_bf16.txt" 2>&1
  echo "compiled $(($(date +%s) - t0)) s: $(tail -qn1 "$out"/compile_*.txt | paste -sd';')"
  # The probes (with docs/experiments/2026-12-07-wgmma-decode-warpgroup-probe.patch too, its rows): seconds.
  timeout 60 "$build/moeq_gpu_tests" --gtest_filter='Fp8MmaGpu.Wgmma*' >"$out/probes.txt" 2>&1
  echo "probes rc=$? $(($(date +%s) - t0)) s"
  grep -E "TFLOP|wrong|^\[  (PASSED|FAILED) " "$out/probes.txt"
  MOEQ_DIAG_WS=256 timeout 100 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma \
    --codes canonical --tuning "$st6" -M 256 --layout indexed >"$out/verify_pp.txt" 2>&1
  echo "verify E ping-pong rc=$? $(($(date +%s) - t0)) s"
  grep -hE "^(pass|FAIL)" "$out/verify_pp.txt"
  diag_steps "$st6" E E 0 256 0 256
  qwen3_baseline_steps
  cat "$out/steps.txt"
  rm -f "$out/o.tmp"
  echo "done $(($(date +%s) - t0)) s"
  exit 0
fi
if [ "$mode" = tests ]; then
  # The e4m3 GPU tests with ping-pong: they compile their own kernels (cold on a fresh machine, minutes).
  tests='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*'
  MOEQ_DIAG_WS=256 timeout 300 "$build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests_pp.txt" 2>&1
  echo "tests ping-pong rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$out/tests_pp.txt" | sort -u
  exit 0
fi
echo "unknown mode '$mode' (short, tests or w)" >&2
exit 2
