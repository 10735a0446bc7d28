#!/usr/bin/env bash
# The e4m3 warp-specialized consumers software-pipelined (tile j + 1 decoded while tile j's MMAs
# run): the GPU tests that reach them, the Qwen3 layer with bf16 and FP8 per-token activations
# (prepared and canonical codes, M = 1024 and 4096, two rounds), ncu's time per kernel at
# M = 4096 and the e4m3 GEMM1's warp states.
# Usage: v35_e4m3_pipelined.sh BUILD   (env OUT; kernels compiled on the workstation into .cache-device)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
touch "$out/.start"
gpu_tests "" 'ExpertsGpu.E4m3ActivationsOnMxfp4WarpSpecializedTilesMatchOracle:ExpertsGpu.RowScalesAfterKGroupsAndSplitK' 120
layer_rounds 2 --preset qwen3-30b-a3b --scheme mxfp4 mxfp4:fp8-token --codes prepared canonical -M 1024 4096
ncu_scheme_times "--preset qwen3-30b-a3b --codes canonical -M 4096" mxfp4:fp8-token mxfp4
timeout 90 ncu --clock-control none -k moeq_moe_gemm -c 1 --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section SourceCounters -o "$out/gemm1" "$build/moeq" run --preset qwen3-30b-a3b \
  --scheme mxfp4:fp8-token --codes canonical -M 4096 >"$out/ncu-sections.txt" 2>&1
echo "ncu sections rc=$?"
ncu --import "$out/gemm1.ncu-rep" --print-details all >>"$out/ncu-sections.txt" 2>&1
grep -E "Duration|Throughput|Stall|Issue Slots|Warp Cycles|Pipe" "$out/ncu-sections.txt" | head -30
ncu --import "$out/gemm1.ncu-rep" --page source --csv --print-source sass 2>/dev/null |
  python3 "$(dirname "$0")/ncu_source_top.py" 40
rm -f "$out/gemm1.ncu-rep"
echo "compiled here: $(find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | wc -l) kernels"
echo "done $(($(date +%s) - t0)) s"
