#!/usr/bin/env bash
# Where gpt-oss-120b's step spends its time beside the GEMMs at M = 640 / 1024 (session 54: moeq's step is ~92 us
# longer than its two GEMMs timed alone, Humming's ~22-31 us): every kernel of one `moeq run` step under ncu (each
# kernel alone, caches flushed, clocks left alone), and the same GEMMs under `moeq bench --kernel gemm1 / gemm2`
# with the same ncu settings. If the step's GEMM kernels take as long as the bench's, the loss is the other
# kernels (routing, the `/t` ordering pass, the activation, the reduce); if longer, it is the GEMMs' inputs in the
# step (routing, rows) rather than the glue. FUSED=0 runs the step with MOEQ_FUSED_ACTIVATION=0 (the activation
# kernel), FUSED=1 as shipped. PRESET / SCHEME pick the layer (default gpt-oss-120b mxfp4); STEP_ONLY=1 skips the GEMMs
# alone; TAG names the output files apart.
# NOTE: the GEMMs alone run the shipped table's tiles (--tuning): without it `moeq bench` times the planner's rules, whose
# tiles the step does not run (session 55's first run of this script).
# Usage: s55_step_kernels.sh MOEQ [M ...]   (env OUT, MOEQ_CACHE_DIR, FUSED, PRESET, SCHEME, STEP_ONLY, TAG)
set -u
moeq="$1"
shift
out="${OUT:-/tmp/moeq-out}"
mkdir -p "$out"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
preset="${PRESET:-gpt-oss-120b}" scheme="${SCHEME:-mxfp4}" tag="${TAG:-}"
table="$(cd "$(dirname "$0")/../.." && pwd)/tuning/sm_90/${preset}_${scheme}.json"
ms=("$@")
[ ${#ms[@]} -eq 0 ] && ms=(640 1024)
for m in "${ms[@]}"; do
  MOEQ_FUSED_ACTIVATION="${FUSED:-1}" timeout 200 ncu --clock-control none --csv --metrics "$metrics" \
    "$moeq" run --preset "$preset" --scheme "$scheme" -M "$m" >"$out/step${tag}_$m.csv" 2>&1
  echo "step $preset M=$m rc=$?"
  [ "${STEP_ONLY:-0}" = 1 ] && continue
  for kernel in gemm1 gemm2; do
    timeout 200 ncu --clock-control none --csv --metrics "$metrics" -k regex:'^moeq_moe_gemm$' --launch-skip 3 \
      --launch-count 1 "$moeq" bench --kernel "$kernel" --preset "$preset" --scheme "$scheme" --tokens "$m" --trials 1 \
      --iterations 2 --tuning "$table" >"$out/${kernel}${tag}_$m.csv" 2>&1
    echo "$kernel M=$m rc=$?"
  done
done
