#!/usr/bin/env bash
# The kept quantizer rule (warps per row doubled while the grid is short) timed against 87426ab,
# and a look inside the FP8 per-token fused activation-quantize at M = 256 (14.3 us against 5.2 for
# the activation alone, flat from M = 16): ncu's warp-state and instruction sections, the SASS size.
# Usage: v29_quantizer_profile.sh BUILD BASE_MOEQ   (env OUT; kernels compiled on the workstation)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
base_moeq="$2"
touch "$out/.start"
for moeq in "$build/moeq" "$base_moeq" "$build/moeq" "$base_moeq"; do
  timeout 60 "$moeq" bench --trials 5 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token \
    -M 16 256 4096 >>"$out/layer.txt" 2>&1
  echo "layer $moeq rc=$? $(($(date +%s) - t0)) s"
  grep -E "^layer  qwen" "$out/layer.txt" | tail -6 | awk '{print $3, $4, $5}' | paste -sd' '
done
for m in 16 256 4096; do
  f="$out/ncu-$m.txt"
  timeout 50 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run --preset qwen3-30b-a3b \
    --scheme mxfp4:fp8-token -M "$m" >"$f" 2>&1
  echo "ncu $m rc=$? $(($(date +%s) - t0)) s"
  awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $(NF-1), $NF}' "$f" | sed -n 3,10p | paste -sd' '
done
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
for f in $(find "$MOEQ_CACHE_DIR" -name '*.cubin'); do
  if cuobjdump -symbols "$f" 2>/dev/null | grep -q "moeq_activation_quantize\|moeq_quantize_activation"; then
    n=$(cuobjdump -sass "$f" 2>/dev/null | grep -cE '^\s+/\*[0-9a-f]{4,}\*/')
    echo "$f sass_lines=$n" >>"$out/sass_sizes.txt"
  fi
done
sort -t= -k2 -n "$out/sass_sizes.txt" | tail -12
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
