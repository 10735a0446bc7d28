#!/usr/bin/env bash
# The kept quantizer rule (warps per row doubled while the grid is short) timed against 87426ab,
# and a look inside the FP8 per-token fused activation-quantize at M = 256 (14.3 us against 5.2 for
# the activation alone, flat from M = 16): ncu's warp-state and instruction sections.
# (Its first run also tried to count the kernel's SASS lines with cuobjdump; that step printed
# nothing and is gone.)
# Usage: v29_quantizer_profile.sh BUILD BASE_MOEQ   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
touch "$out/.start"
layer_against_base "$base_moeq" --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token -M 16 256 4096
ncu_step_times "--preset qwen3-30b-a3b --scheme mxfp4:fp8-token" 16 256 4096
for k in moeq_activation_quantize moeq_activation; do
  timeout 90 ncu --clock-control none --section WarpStateStats --section InstructionStats --section LaunchStats \
    --section SpeedOfLight -k "$k" -c 1 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 256 \
    >"$out/ncu-detail-$k.txt" 2>&1
  echo "ncu detail $k rc=$? $(($(date +%s) - t0)) s"
done
timeout 90 ncu --clock-control none --section WarpStateStats --section InstructionStats --section LaunchStats \
  --section SpeedOfLight -k moeq_activation -c 1 "$build/moeq" run --preset qwen3-30b-a3b --scheme mxfp4 -M 256 \
  >"$out/ncu-detail-bf16-activation.txt" 2>&1
grep -E "Stall No Instruction|Executed Instructions |Duration|Registers Per|Grid Size|Warp Cycles Per Issued|No Instruction" \
  "$out"/ncu-detail-*.txt | head -40
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
