#!/usr/bin/env bash
# Session 31, call 3: the folded quantizer's correctness on the final binaries (the fold skipped where the
# routing takes the chunked pair), then the gap tables against session 30's (v70_gaps.sh's second half).
# (1) FoldedQuantizerGpu (the fold against the quantizer's own launch on every routing path), the quantized
#     layers against the float64 oracle (16 pairs x 3 layouts), the rest of ExpertsGpu and RoutingGpu;
#     the warm-up test; then the cubins compiled here, for the next call.
# (2) Steps: this build against BINS/moeq_base (37dd879), Qwen3-30B-A3B MXFP4 x FP8 per token, M = 256 / 4096;
#     GEMM1 / GEMM2 with row scales (FP8 per token), MXFP4 and INT4, M = 16 / 256: the direct tiles' row scales
#     fetched before the main loop against read in the epilogue.
# (3) The gap tables (HEAD) against OLD (0d287a3's tables), A B B A, while the call's time lasts.
# Usage: v72_fold_checks.sh BUILD OLD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
old="$2"
touch "$out/.start"
gpu_tests "" 'FoldedQuantizerGpu.*:ExpertsGpu.*:RoutingGpu.*:-RoutingGpu.PrintsTimings' 260
grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 2500; echo
timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
echo "warmup rc=$? $(($(date +%s) - t0)) s"
grep -E "^\[  FAILED|^\[       OK|PASSED" "$out/warmup.txt"
find "$MOEQ_CACHE_DIR" -name '*.cubin' -newer "$out/.start" | tar cJf "$out/new_cubins.txz" -T - 2>/dev/null
# The shipped tables' tiles with row scales against the float64 oracle (indexed; contiguous: row scales by permuted_src).
for args in "--scheme mxfp4:fp8-token -M 256" "--scheme int4-g128:fp8-token -M 256 --layout contiguous" \
  "--scheme mxfp4:fp8-token -M 33 --layout contiguous"; do
  # shellcheck disable=SC2086
  timeout 40 "$build/moeq" run --preset qwen3-30b-a3b $args --check >"$out/run.tmp" 2>&1
  echo "run --check $args rc=$? $(grep -E "^check|rror" "$out/run.tmp" | tail -1)"
done
for binary in moeq moeq_base moeq_base moeq; do
  timeout 40 "$build/$binary" bench --trials 7 --kernel layer --preset qwen3-30b-a3b --scheme mxfp4:fp8-token \
    -M 256 256 4096 >"$out/l.tmp" 2>&1
  echo "rc=$? $binary" >>"$out/steps.txt"
  grep -E '^layer  ' "$out/l.tmp" | tail -n +2 | sed "s/^/$binary /" >>"$out/steps.txt"
done
echo "fold steps $(($(date +%s) - t0)) s"
for binary in moeq moeq_base moeq_base moeq; do
  timeout 40 "$build/$binary" bench --trials 7 --kernel gemm1 gemm2 --preset qwen3-30b-a3b \
    --scheme mxfp4:fp8-token int4-g128:fp8-token -M 16 256 >"$out/g.tmp" 2>&1
  echo "rc=$? $binary" >>"$out/gemms.txt"
  grep -E '^gemm[12] ' "$out/g.tmp" | sed "s/^/$binary /" >>"$out/gemms.txt"
done
echo "gemms $(($(date +%s) - t0)) s"
awk '{print $1, $2, $4, $5, $6}' "$out/gemms.txt"
[ $(($(date +%s) - t0)) -lt 420 ] && ab gaps old qwen3-30b-a3b mxfp4 "160 192 256 320 352 1280 1536 1792 2560 3072 3584" "" "--tuning $old/qwen3-30b-a3b_mxfp4.json"
[ $(($(date +%s) - t0)) -lt 470 ] && ab gaps old gpt-oss-120b mxfp4 "3 4 160 192 384 512 640 704 2560 3072 3584" "" "--tuning $old/gpt-oss-120b_mxfp4.json"
[ $(($(date +%s) - t0)) -lt 520 ] && ab gaps old qwen3-30b-a3b int4-g128 "192 320 352 1536 1792 3072 3584" "" "--tuning $old/qwen3-30b-a3b_int4-g128.json"
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
