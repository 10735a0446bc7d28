#!/usr/bin/env bash
# One call for three changes (the session's device time is short):
# 1. GEMM1's input quantizer on a side stream beside the routing kernels, and the fused FP8
#    per-token activation-quantize as one rolled loop (activation outputs staged in shared
#    memory): the Qwen3 MXFP4 x FP8-token layer new / base / new / base at M = 16, 256, 4096
#    (planner tiles both), ncu of the new step, ncu sections of the new activation-quantize;
# 2. their tests (graph capture with the side stream's branch, the elementwise kernels, the
#    quantized pairs);
# 3. the Qwen3 MXFP4 table re-tuned at M <= 256 over the direct and 16-row candidates with BASE (its
#    kernels as compiled for BASE), then the bf16 layer with the new table, the shipped one, the planner.
# Usage: v33_side_stream_rolled_tune.sh BUILD BASE_MOEQ "TILE ..."   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
tiles="$3"
touch "$out/.start"
layer_against_base "$base_moeq" --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 16 256 4096 --no-shipped-tuning
ncu_step_times "--preset qwen3-30b-a3b --scheme mxfp4:fp8-token --no-shipped-tuning" 16 256 4096
timeout 40 ncu --clock-control none --section WarpStateStats --section InstructionStats --section SpeedOfLight \
  -k moeq_activation_quantize -c 1 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 256 \
  --no-shipped-tuning >"$out/ncu-detail.txt" 2>&1
grep -E "Duration|Executed Instructions  |Warp Cycles Per Issued|represents about" "$out/ncu-detail.txt" | sort -u | head
timeout 150 "$build/moeq_gpu_tests" \
  --gtest_filter='ExpertsGpu.GraphCaptureReplaysWithNewRouting:ElementwiseGpu.ActivationQuantize*:ElementwiseGpu.Activations*:ElementwiseGpu.Quantize*' \
  >"$out/gpu_tests.txt" 2>&1
echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|^\[       OK" "$out/gpu_tests.txt" | head -20
timeout 90 "$build/moeq_gpu_tests" --gtest_filter='ExpertsGpu.QuantizedActivationPairsMatchOracle' >"$out/gpu_tests_pairs.txt" 2>&1
echo "pairs rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|^\[       OK" "$out/gpu_tests_pairs.txt" | head -8
left=$((t0 + 560 - $(date +%s) - 40))
# shellcheck disable=SC2086
timeout "$left" "$base_moeq" tune --preset qwen3-30b-a3b --scheme mxfp4 -M 1 2 4 8 16 32 64 128 256 --candidates $tiles \
  --out "$out/qwen3-30b-a3b_mxfp4_small.json" >"$out/tune.txt" 2>&1
echo "tune rc=$? $(($(date +%s) - t0)) s"
tail -12 "$out/tune.txt"
for how in new shipped planner; do
  case $how in
    new) flag="--tuning $out/qwen3-30b-a3b_mxfp4_small.json" ;;
    shipped) flag="" ;;
    planner) flag="--no-shipped-tuning" ;;
  esac
  [ "$how" = new ] && [ ! -s "$out/qwen3-30b-a3b_mxfp4_small.json" ] && continue
  # shellcheck disable=SC2086
  timeout 20 "$base_moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 -M 1 4 16 64 256 $flag \
    >>"$out/layer-$how.txt" 2>&1
  echo "$how: $(grep -E '^layer  qwen' "$out/layer-$how.txt" | tail -5 | awk '{print $4, $5}' | paste -sd' ')"
done
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
