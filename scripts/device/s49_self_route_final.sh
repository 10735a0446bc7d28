#!/usr/bin/env bash
# The first device call of docs/experiments/2026-12-05-self-routed-kernel.patch (written for session 49's third call,
# which found no machine): the self-routed GEMM1 as its own kernel (MoeGemmCfg::kSelfRouted; in session 49's call 2,
# steps that never self-route moved by up to +6 us with the earlier version, likely by its run-time flag) against the
# commit the patch applies to (OLD_BUILD). GPU tests (self-routed bit equality, routing edge cases, graph capture, the warm-up
# test: no compile after warm_up, which now lists the self-routed kernels), then whole steps O N Z Z N O (O = OLD_BUILD;
# Z = BUILD with MOEQ_SELF_ROUTE=0: route_fused's new wait order without self-routing), shipped tables and the
# planner's rules, then `moeq verify` on the changed paths.
# Usage: s49_self_route_final.sh BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old_build="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
self_route_gpu_tests
layer_steps shipped qwen3-30b-a3b mxfp4 "1 2 16" "O N Z Z N O"
layer_steps shipped qwen3-30b-a3b int4-g128 "1 2 16" "O N Z Z N O"
layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token "1 2" "O N Z Z N O"
layer_steps shipped gpt-oss-120b mxfp4 "1 2 16" "O N Z Z N O"
layer_steps shipped mixtral-8x7b mxfp4 "1 2 4" "O N Z Z N O"
layer_steps planner mixtral-8x7b mxfp4 "1 2 4" "O N Z Z N O"
layer_steps planner mixtral-8x7b nvfp4 "1 2" "O N Z Z N O"
layer_steps planner mixtral-8x7b int4-g128 "1" "O N Z Z N O"
layer_verify "mixtral-8x7b nvfp4 1" "qwen3-30b-a3b int4-g128 1 2" "gpt-oss-120b mxfp4 1"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
