#!/usr/bin/env bash
# The MMA-order pass of 16-bit GEMM1 inputs folded into the routing's first launch (cuda::fold_order_rows), one call
# (pack: scripts/device/lists/s58_pack.txt, built with it).
# 1. Correct: the fold against the pass's own launch byte for byte on every routing path (FoldedQuantizerGpu), the
#    order kernel, the routing, `/t` layers against the oracle (ExpertsGpu.MmaOrderTilesMatchOracle, last: it compiles
#    the tiny layer's tiles here), graph capture, the warm-up test; `moeq verify` on the layers where the tables run
#    `/t` GEMM1 tiles below the chunked routing (gpt-oss-120b M = 640 / 1024, Qwen3-30B-A3B MXFP4 M = 256 / 640, INT4
#    M = 640).
# 2. Steps, N = folded, R = MOEQ_FOLD_ORDER=0 (the pass alone), N R R N; on the chunked routing path (gpt-oss-120b
#    M = 2048, Qwen3 MXFP4 M = 1024: 8192 slots) N = alone there, C = MOEQ_FOLD_ORDER=2 (folded there too), N C C N.
# Prediction: -3 to -6 us a step where it folds (the pass's 5.3 / 7.2 us at gpt-oss M = 640 / 1024 under ncu overlap
# route_count's single CTA, and one kernel boundary fewer): ~-0.5% at gpt-oss M = 640 / 1024, ~-1.5% at Qwen3 M = 256.
# Chunked: C within +-0.5% of N (the place kernel waits for the order CTAs instead of GEMM1 waiting for the pass;
# session 31's quantizer fold lost 1% there, but its CTAs ran a heavier body).
# Usage: s58_fold_order.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
filtered_gpu_tests 'FoldedQuantizerGpu.*:ElementwiseGpu.MmaOrder*:RoutingGpu.*:ExpertsGpu.GraphCapture*:ExpertsGpu.MmaOrderTilesMatchOracle' 200
VERIFY_ACTIVATIONS=swiglu-oai layer_verify "gpt-oss-120b mxfp4 640 1024"
layer_verify "qwen3-30b-a3b mxfp4 256 640" "qwen3-30b-a3b int4-g128 640"
layer_steps shipped gpt-oss-120b mxfp4 "640 1024" "N R R N"
layer_steps shipped qwen3-30b-a3b mxfp4 "256 640" "N R R N"
layer_steps shipped gpt-oss-120b mxfp4 "2048" "N C C N"
layer_steps shipped qwen3-30b-a3b mxfp4 "1024" "N C C N"
layer_steps shipped qwen3-30b-a3b int4-g128 "256 640" "N R R N"
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
