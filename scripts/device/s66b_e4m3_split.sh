#!/usr/bin/env bash
# bin: 2ac32fa with docs/experiments/2026-12-07-e4m3-256-channel-whole-k.patch applied; bin-base: 2ac32fa. Ran in
# session 66 (H100; bench/results/2026-12-07-h100-s66-e4m3-whole-k.md).
# Session 66, second call: where the 256-channel whole-K e4m3 tile (W, bin: tables/s66_e4m3_whole_k.json) loses to
# main's 128-channel st6 tile (E, bin-base), Qwen3-30B-A3B MXFP4 x FP8 per token, M = 4096.
# steps: W with MOEQ_DIAG_WS 0, 8 (no wgmma), 24 (and no token copies), 40 (no code copies), 56 (no copies); the
#   128-channel body on 4 stages (E4, bin: tables/s66_e4m3_st4_128.json) against st6 (E, bin-base).
# ncu: per-kernel times of one `moeq run` for W, E (bin-base), the values path and bf16 (bin-base).
# Pack: .cache-device-s66c.txz (bin, bin-base and their kernels). Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66c.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66b_e4m3_split.sh all .cache-device/bin   (carry: [".cache-device-s66c.txz"])
# Usage: s66b_e4m3_split.sh steps|ncu|all BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
st6="$tables/s64_any_st6.json" whole="$tables/s66_e4m3_whole_k.json" st4="$tables/s66_e4m3_st4_128.json"
new_build="$build" base_build="$(dirname "$build")/bin-base"
old_build="$base_build"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
export STEP_TIMEOUT=150 STEP_CODES=canonical
if [ "$mode" = steps ] || [ "$mode" = all ]; then
  diag_steps "$whole" E W 0 8 24 40 56 0
  for who in E4 E E4 E; do
    echo "$who" >>"$out/steps.txt"
    if [ "$who" = E4 ]; then layer_steps "$st4" qwen3-30b-a3b mxfp4:fp8-token 4096 E
    else layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P; fi
  done
  cat "$out/steps.txt"
fi
if [ "$mode" = ncu ] || [ "$mode" = all ]; then
  for t in W E N B; do
    bin="$base_build/moeq" args=(--scheme mxfp4:fp8-token)
    case "$t" in
      W) bin="$new_build/moeq" args+=(--fp8-wgmma --tuning "$whole") ;;
      E) args+=(--fp8-wgmma --tuning "$st6") ;;
      B) args=(--scheme mxfp4) ;;
    esac
    ncu_qwen3_times "$t" "$bin" "${args[@]}"
  done
fi
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
