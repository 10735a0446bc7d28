#!/usr/bin/env bash
# Prepared in session 29, not yet run: the GEMMs as the FP8 per-token step plans them (row-scale
# epilogue, d411194) against bf16 at Qwen3-30B-A3B M = 16 / 256 (issue 5's +9% / +14% steps), then the
# shipped tables' persistent entries through Experts::apply against the reference (M = 768 and 1024).
# Usage: v63_fp8_rows_verify.sh BUILD   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
timeout 60 "$build/moeq" bench --trials 7 --kernel gemm1 gemm2 quantize-fp8-token activation --preset qwen3-30b-a3b \
  --scheme mxfp4 mxfp4:fp8-token -M 256 16 >"$out/fp8_gemms.txt" 2>&1
echo "fp8 gemms rc=$? $(($(date +%s) - t0)) s"
grep -E "^(gemm[12]|quantize|activation)" "$out/fp8_gemms.txt" | cut -c1-110
for case in "mxfp4 768 1024" "int4-g128 1024"; do
  # shellcheck disable=SC2086
  set -- $case
  scheme="$1"
  shift
  timeout 150 "$build/moeq" verify --preset qwen3-30b-a3b --scheme "$scheme" --layout indexed --activation silu -M "$@" \
    --codes prepared >>"$out/verify.txt" 2>&1
  echo "verify $scheme rc=$? $(($(date +%s) - t0)) s"
done
grep -E "passed|failed|PASS|FAIL" "$out/verify.txt" | tail -6
