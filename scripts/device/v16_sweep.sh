#!/usr/bin/env bash
# Session 15, call B: the 8-row direct tiles of 64 channels per warp (call A's winners at Qwen3 M = 16 or 64)
# against the planner's 8x128/1x4x1/2/r over every M from 8 to 64, so a rule can be told from the noise of
# wave quantization; a second round where the choice matters, and the other presets.
# Usage: v16_sweep.sh BUILD   (env OUT; SWEEP and SWEEP2: "PRESET|M ...|TILE ..." lines)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
all="$(printf '%s\n%s\n' "$SWEEP" "${SWEEP2:-}")"
warm_tiles "int4-g128 mxfp4 fp8-block" "$(sweep_tiles "$all")"
sweep_cases "$SWEEP"
mv "$out/sweep.txt" "$out/sweep1.txt"
sweep_cases "${SWEEP2:-}"
echo "done $(($(date +%s) - t0)) s"
