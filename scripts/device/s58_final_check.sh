#!/usr/bin/env bash
# Session 58's last call, on the final binaries (kActivationEpilogueMaxRows 16 -> 2048, the order fold up to 3072
# slots): the warm-up test, the fold's tests, `moeq verify` where the wider direct fusion and the fold's threshold now
# act by default, and steps there (N only: the A/B figures are calls 1 and 5's).
# Usage: s58_final_check.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
filtered_gpu_tests 'FoldedQuantizerGpu.*' 60
VERIFY_ACTIVATIONS=swiglu-oai layer_verify "gpt-oss-120b mxfp4 8 640 1024"
layer_verify "qwen3-30b-a3b mxfp4 4 64 256" "mixtral-8x7b int4-g128 32"
layer_steps shipped qwen3-30b-a3b mxfp4 "4 32 256" "N"
layer_steps shipped mixtral-8x7b int4-g128 "32" "N"
layer_steps shipped gpt-oss-120b mxfp4 "8 640 1024" "N"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
