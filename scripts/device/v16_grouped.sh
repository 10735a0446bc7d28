#!/usr/bin/env bash
# Session 15, call D: the direct tiles' deeper rings issued in groups (a group's loads together,
# after the group before has arrived; GEMM v16). MoeGemmGpu on TEST_TILES (every scheme, both code
# layouts, gather and masked), then the sweep of SWEEP ("PRESET|M ...|TILE ..." lines).
# Usage: v16_grouped.sh BUILD   (env OUT; TEST_TILES; SWEEP)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
test_schemes="int4-g128 mxfp4 fp8-block nvfp4 int8-ch int4-g32-zp mxfp8 fp8-channel mxfp4:f16 int4-g64-zp int4-ch int4-g128:f16"
warm_tiles "$test_schemes" "$TEST_TILES" &
warm_tiles "int4-g128 mxfp4 fp8-block" "$(sweep_tiles "$SWEEP")" &
wait
gpu_tests "$TEST_TILES" 'MoeGemmGpu*' 200
sweep_cases "$SWEEP"
echo "done $(($(date +%s) - t0)) s"
