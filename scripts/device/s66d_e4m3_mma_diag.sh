#!/usr/bin/env bash
# bin: 2ac32fa with docs/experiments/2026-12-07-e4m3-256-channel-whole-k.patch applied; bin-base: 2ac32fa. Ran in
# session 66 (H100; bench/results/2026-12-07-h100-s66-e4m3-whole-k.md).
# Session 66, fourth look: the 256-channel whole-K e4m3 tile's MMAs (W) cost ~560 us of the Qwen3 M = 4096 step
# against ~123 us on main's 128-channel tile (E). Timing-only variants of W (MOEQ_DIAG_WS, results wrong): 64 = both
# channel tiles' MMAs into one accumulator set (is alternating accumulators the cost?), 128 = each group of 4 MMAs
# waited for right after its issue (does the pipelining work at all?); then E (bin-base) again.
# Pack: .cache-device-s66e.txz. Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66e.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66d_e4m3_mma_diag.sh .cache-device/bin   (carry: [".cache-device-s66e.txz"])
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
old_build="$(dirname "$build")/bin-base"
export STEP_TIMEOUT=150 STEP_CODES=canonical
diag_steps "$tables/s66_e4m3_whole_k.json" E W 0 64 128 0
echo "E" >>"$out/steps.txt"
layer_steps "$tables/s64_any_st6.json" qwen3-30b-a3b mxfp4:fp8-token 4096 P
cat "$out/steps.txt"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
