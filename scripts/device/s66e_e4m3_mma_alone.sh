#!/usr/bin/env bash
# bin: 2ac32fa with docs/experiments/2026-12-07-e4m3-256-channel-whole-k.patch applied; bin-base: 2ac32fa.
# Session 66, fifth look: are the e4m3 MMAs slow with nothing beside them? Timing only (MOEQ_DIAG_WS, results wrong),
# Qwen3 M = 4096 steps: W (256 channels, bin) with 48 (no token or code copies: the MMAs read whatever the ring holds)
# and 50 (no copies, no dequantization), against W with no wgmma and no copies (56: 402 us in call 6); E (main, bin-base)
# with 48.
# Pack: .cache-device-s66f.txz. Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66f.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66e_e4m3_mma_alone.sh .cache-device/bin   (carry: [".cache-device-s66f.txz"])
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
old_build="$(dirname "$build")/bin-base"
export STEP_TIMEOUT=150 STEP_CODES=canonical
diag_steps "$tables/s66_e4m3_whole_k.json" E W 48 50 0
diag_steps "$tables/s64_any_st6.json" P E 48 0
cat "$out/steps.txt"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
