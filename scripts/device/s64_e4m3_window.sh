#!/usr/bin/env bash
# Issue 5 at M = 4096: the e4m3 consumers with one base per row (its largest MX exponent over K) and a promotion
# window (kE4m3PromoteTiles, MOEQ_DIAG_E4M3_WINDOW): tile j + 1's MMAs queue behind tile j's while the warpgroup
# decodes, and the partial is waited for and promoted once per window instead of once per 128-k tile.
# check: the e4m3 tests (the GEMM bit-equality of `/p`, `/t` and `/s/t` tiles, the layer oracle on every e4m3 tile,
#   the e2m1 -> e4m3 table), then `moeq verify --fp8-wgmma` of Qwen3-30B-A3B at M = 256 / 1024 on the st6 table with
#   windows 1, 2 (default) and 4: the error each window costs.
# time: Qwen3-30B-A3B, canonical codes, M = 4096, one process per column, in the order
#   bf16 N | FP8 N | P:st6 | E:st6 W1 W2 W4 W4 W2 W1 | P:st6 | FP8 N | bf16 N
#   (P: the previous main's e4m3 body, 429fdf6, from OLD_BUILD, `--fp8-wgmma`; O would be its values path).
# Prediction: W1 (the old chain, less the shuffles) ~ O; W2 -10 to -20% on GEMM1 (half the waits and promotions, the
# MMAs of the next tile queued during the decode); W4 a few % more.
# ncu: each kernel of one step, O, W1 / W2 / W4 and the values path (ncu_*.csv).
# probe: the steps of O, W4 and W2 with the SM clock and power sampled, with and without PDL.
# ncu2: the GEMMs under ncu as the bench's layer steps run them (bench weights), O, W4, W1.
# omit: each GEMM's marginal cost inside the step (MOEQ_DIAG_OMIT), O and W4.
# nsys: the kernels' durations inside the bench's steps (nsys, graph nodes traced), O and W4.
# Usage: s64_e4m3_window.sh check|time|ncu|probe|ncu2|omit|nsys|all BUILD OLD_BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
mode="$1"
device_setup "$2"
old_build="$3"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
if [ "$mode" = check ] || [ "$mode" = all ]; then
  tests='MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile:ExpertsGpu.E4m3*:Fp8MmaGpu.*'
  timeout 300 "$build/moeq_gpu_tests" --gtest_filter="$tests" >"$out/tests.txt" 2>&1
  echo "tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK \]|^\[  FAILED  \]" "$out/tests.txt" | sort -u
  for w in 1 2 4; do
    MOEQ_DIAG_E4M3_WINDOW=$w timeout 150 "$build/moeq" verify --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma \
      --codes canonical --tuning "$tables/s63_st6.json" --activation silu -M 256 1024 --layout indexed contiguous \
      >"$out/verify_w$w.txt" 2>&1
    echo "verify W$w rc=$? $(($(date +%s) - t0)) s: $(grep -cE '^pass' "$out/verify_w$w.txt") pass"
    grep -E "^(pass|FAIL)" "$out/verify_w$w.txt" | head -4
  done
fi
if [ "$mode" = time ] || [ "$mode" = all ]; then
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  st6="$tables/s63_st6.json"
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P
  for w in 1 2 4 4 2 1; do
    echo "W$w" >>"$out/steps.txt"
    MOEQ_DIAG_E4M3_WINDOW=$w layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E
  done
  layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
fi
if [ "$mode" = ncu ] || [ "$mode" = all ]; then
  for t in O W1 W2 W4 N; do
    bin="$build/moeq"
    case "$t" in
      N) args=(--scheme mxfp4:fp8-token) ;;
      O) args=(--scheme mxfp4:fp8-token --fp8-wgmma --tuning "$tables/s63_st6.json") bin="$old_build/moeq" ;;
      *) args=(--scheme mxfp4:fp8-token --fp8-wgmma --tuning "$tables/s63_st6.json") ;;
    esac
    w="${t#W}"
    [ "$t" = N ] || [ "$t" = O ] && w=2  # N compiles no e4m3 GEMM, O's binary has no window; read once, 1-16
    MOEQ_DIAG_E4M3_WINDOW="$w" timeout 200 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
      "$bin" run --preset qwen3-30b-a3b "${args[@]}" --codes canonical -M 4096 >"$out/ncu_$t.csv" 2>&1
    echo "ncu $t rc=$? $(($(date +%s) - t0)) s"
  done
fi
if [ "$mode" = probe ]; then
  # Why ncu's per-kernel gain does not show in the steps: the SM clock and power while each step runs, and the steps
  # without programmatic dependent launch (MOEQ_PDL=0).
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  st6="$tables/s63_st6.json"
  for pdl in 1 0; do
    for who in P W4 W2 W4 P; do
      echo "PDL$pdl $who" >>"$out/steps.txt"
      nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 >"$out/smi.tmp" &
      smi=$!
      if [ "$who" = P ]; then MOEQ_PDL=$pdl layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P
      else MOEQ_PDL=$pdl MOEQ_DIAG_E4M3_WINDOW=${who#W} layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E; fi
      kill $smi
      sort -t, -k2 -n -r "$out/smi.tmp" | head -40 | awk -F, '{c+=$1; p+=$2; n++} END {printf "busy samples: %d MHz, %.0f W\n", c/n, p/n}' >>"$out/steps.txt"
    done
  done
  cat "$out/steps.txt"
fi
if [ "$mode" = ncu2 ]; then
  # The GEMMs as the steps run them: ncu over `moeq bench --kernel layer` (bench weights: random codes, every scale
  # 2^-4, copies rotated past L2; caches not flushed by ncu), kernels 40-51 of the process.
  for t in O W4 W1; do
    bin="$build/moeq" w="${t#W}"
    [ "$t" = O ] && bin="$old_build/moeq" w=2
    MOEQ_DIAG_E4M3_WINDOW="$w" timeout 200 ncu --clock-control none --cache-control none --csv \
      --metrics gpu__time_duration.sum --launch-skip 40 --launch-count 12 "$bin" bench --kernel layer --trials 1 \
      --iterations 3 --fp8-wgmma --tuning "$tables/s63_st6.json" --codes canonical --preset qwen3-30b-a3b \
      --scheme mxfp4:fp8-token -M 4096 >"$out/ncu2_$t.csv" 2>&1
    echo "ncu2 $t rc=$? $(($(date +%s) - t0)) s"
    grep -E '"moeq_' "$out/ncu2_$t.csv" | awk -F'","' '{print $5, $(NF)}' | sed 's/"//g' | tr '\n' ';'
    echo
  done
fi
if [ "$mode" = omit ]; then
  # Each GEMM's marginal cost inside the step (MOEQ_DIAG_OMIT: the step less the step without it), O and W4.
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  st6="$tables/s63_st6.json"
  for who in P W4 W4 P; do
    for omit in none 'moeq_moe_gemm@0%2' 'moeq_moe_gemm@1%2'; do
      echo "$who omit $omit" >>"$out/steps.txt"
      o=()
      [ "$omit" != none ] && o=(MOEQ_DIAG_OMIT="$omit")
      if [ "$who" = P ]; then env "${o[@]}" bash -c ". scripts/device/evidence_lib.sh; build=$build old_build=$old_build out=$out t0=$t0; layer_steps $st6 qwen3-30b-a3b mxfp4:fp8-token 4096 P" >/dev/null
      else env "${o[@]}" MOEQ_DIAG_E4M3_WINDOW=4 bash -c ". scripts/device/evidence_lib.sh; build=$build old_build=$old_build out=$out t0=$t0; layer_steps $st6 qwen3-30b-a3b mxfp4:fp8-token 4096 E" >/dev/null; fi
    done
  done
  cat "$out/steps.txt"
fi
if [ "$mode" = scan ]; then
  # What the per-tile scan costs in the step: W4 against the same kernels with no scan (bin-noscan: base 123, the
  # bench's every scale; timing only), and P. bin-noscan was built from a17eec4 with the consumers' scan replaced by
  # `row_base = {123, 123}` (a local edit, not committed: .cache-device-s64-noscan.txz).
  export STEP_TIMEOUT=150 STEP_CODES=canonical
  st6="$tables/s63_st6.json"
  for who in P W4 NS NS W4 P; do
    echo "$who" >>"$out/steps.txt"
    case "$who" in
      P) layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P ;;
      W4) MOEQ_DIAG_E4M3_WINDOW=4 layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 E ;;
      NS) MOEQ_DIAG_E4M3_WINDOW=4 old_build="$(dirname "$build")/bin-noscan" layer_steps "$st6" qwen3-30b-a3b mxfp4:fp8-token 4096 P ;;
    esac
  done
  cat "$out/steps.txt"
fi
if [ "$mode" = nsys ]; then
  # The kernels' durations inside the bench's steps (graph nodes traced), O and W4.
  which nsys || ls /usr/local/cuda*/bin | grep -i nsys
  for t in O W4; do
    bin="$build/moeq"
    [ "$t" = O ] && bin="$old_build/moeq"
    MOEQ_DIAG_E4M3_WINDOW=4 timeout 200 nsys profile --cuda-graph-trace=node -o "$out/nsys_$t" --force-overwrite true \
      "$bin" bench --kernel layer --trials 3 --fp8-wgmma --tuning "$tables/s63_st6.json" --codes canonical \
      --preset qwen3-30b-a3b --scheme mxfp4:fp8-token -M 4096 >"$out/nsys_$t.txt" 2>&1
    echo "nsys $t rc=$? $(($(date +%s) - t0)) s"
    nsys stats --report cuda_gpu_kern_sum --format csv "$out/nsys_$t.nsys-rep" 2>/dev/null | cut -d, -f1-9 | head -12
    rm -f "$out/nsys_$t.sqlite"
  done
fi
rm -f "$out/o.tmp" "$out/smi.tmp"
echo "done $(($(date +%s) - t0)) s"
