# Shared steps of the per-session device evidence scripts (v9_evidence.sh, v11_evidence.sh), sourced
# by them: the set-up, and the correctness half of the call. Each script names its own tiles, the
# baseline kernels it warms and the cases it times.
# NOTE: sourced, not run: it sets base, build, out and t0 in the caller's shell (device_setup and
# warm_tiles serve the sweep scripts too).

# device_setup BUILD: build, out and t0, the output folder and the kernel cache's place.
device_setup() {
  set -u
  build="$1"
  out="${OUT:-/tmp/moeq-out}"
  mkdir -p "$out"
  export MOEQ_CACHE_DIR="${MOEQ_CACHE_DIR:-$PWD/.cache-device}"
  t0=$(date +%s)
}

# e4m3_script_setup BUILD: device_setup, st6 (the e4m3 body's st6 tuning table), the GPU's clocks, and the step
# settings the issue-5 e4m3 scripts share.
e4m3_script_setup() {
  device_setup "$1"
  st6="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tables/s64_any_st6.json"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
  export STEP_TIMEOUT=150 STEP_CODES=canonical
}

# warm_tiles "SCHEME ..." "TILE ..." ["PRESET ..."]: compiles those GEMM kernels (sm_90a; the tiny
# preset unless others are named) on 16 cores, appending to warm.txt.
# NOTE: 16 processes of one compile thread each (`-j 1`): 16 processes of 16 threads would hold 256
# NVRTC compiles in memory at once.
warm_tiles() {
  for p in ${3:-tiny}; do for s in $1; do for t in $2; do echo "--preset $p --scheme $s --tile $t"; done; done; done |
    xargs -P 16 -L 1 sh -c "\"$build/moeq\" compile -j 1 --arch sm_90a \$0 \"\$@\" | tail -1" >>"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
}

# warm_layers "PRESET ..." "SCHEME ...": `moeq compile` of each layer (the planner's kernels and
# its shipped tuning table's tiles), one process per layer, appending to warm.txt.
warm_layers() {
  for p in $1; do for s in $2; do echo "--preset $p --scheme $s"; done; done |
    xargs -P 16 -L 1 sh -c "\"$build/moeq\" compile -j 1 \$0 \"\$@\" | tail -1" >>"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
}

# sweep_tiles "PRESET|M ...|TILE ..." lines: the distinct tiles they name, on one line.
sweep_tiles() { echo "$1" | cut -d'|' -f3 | tr '\n' ' ' | tr ' ' '\n' | sort -u | tr '\n' ' '; }

# gpu_tests "TILE ..." FILTER SECONDS: moeq_gpu_tests (MoeGemmGpu on those tiles, the gtest filter)
# into gpu_tests.txt, and its summary.
gpu_tests() {
  MOEQ_TEST_TILES="$1" timeout "$3" "$build/moeq_gpu_tests" --gtest_filter="$2" >"$out/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" "$out/gpu_tests.txt" | head
}

# sweep_cases "PRESET|M ...|TILE ..." lines: GEMM1 and GEMM2 of INT4, MXFP4 and FP8-block on those
# tiles with $build, one process per scheme and line, appending to sweep.txt.
sweep_cases() {
  echo "$1" | while IFS='|' read -r p m tiles; do
    [ -z "$p" ] && continue
    for s in int4-g128 mxfp4 fp8-block; do
      # shellcheck disable=SC2086
      timeout 100 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset $p --scheme $s -M $m --tile $tiles \
        >>"$out/sweep.txt" 2>&1
    done
    echo "sweep $p rc=$? $(($(date +%s) - t0)) s"
  done
}

# evidence_setup BASE_MOEQ BUILD: device_setup, and the kernel cache warmed for BUILD on every core.
evidence_setup() {
  base="$1"
  device_setup "$2"
  "$(dirname "${BASH_SOURCE[0]}")/warm_parallel.sh" "$build/moeq" 16 >"$out/warm.txt" 2>&1
  echo "warm rc=$? $(($(date +%s) - t0)) s"
}

# evidence_correctness "TILE ...": every GPU test (MoeGemmGpu on those tiles), then, once the
# caller's background jobs are done, `moeq verify` and the warm-up test.
evidence_correctness() {
  gpu_tests "$1" '*' 300
  wait
  timeout 90 "$build/moeq" verify >"$out/verify.txt" 2>&1
  echo "verify rc=$?"
  tail -1 "$out/verify.txt"
  timeout 100 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
  echo "warmup rc=$?"
}

# bench_against_base ROUND PRESET SCHEME M...: GEMM1 and GEMM2 of the planner's picks with $build/moeq
# and $bins/moeq_base (base first in odd rounds, second in even ones) into newROUND.txt and baseROUND.txt.
bench_against_base() {
  local round="$1" preset="$2" scheme="$3" order="base new" which moeq
  shift 3
  [ $((round % 2)) = 0 ] && order="new base"
  for which in $order; do
    moeq="$build/moeq"; [ "$which" = base ] && moeq="$bins/moeq_base"
    # NOTE: --no-shipped-tuning: since session 58 the GEMMs default to the shipped table's tiles; builds before it
    # accept the flag and time the planner's either way.
    timeout 60 "$moeq" bench --trials 5 --kernel gemm1 gemm2 --no-shipped-tuning --preset "$preset" --scheme "$scheme" -M "$@" \
      >>"$out/$which$round.txt" 2>&1
  done
  echo "bench $round $preset $scheme $(($(date +%s) - t0)) s"
}

# layer_against_base BASE_MOEQ ARGS...: `moeq bench --trials 5 --kernel layer ARGS` with $build/moeq and
# BASE_MOEQ, new / base / new / base, into layer.txt; each round's layer rows (scheme, M, us) on one line.
layer_against_base() {
  local base_moeq="$1" moeq before
  shift
  for moeq in "$build/moeq" "$base_moeq" "$build/moeq" "$base_moeq"; do
    before=$(grep -c "^layer  " "$out/layer.txt" 2>/dev/null)
    timeout 60 "$moeq" bench --trials 5 --kernel layer "$@" >>"$out/layer.txt" 2>&1
    echo "layer $moeq rc=$? $(($(date +%s) - t0)) s: $(grep -E "^layer  " "$out/layer.txt" | tail -n +$((${before:-0} + 1)) |
      awk '{print $3, $4, $5}' | paste -sd' ')"
  done
}

# layer_rounds ROUNDS ARGS...: `moeq bench --trials 5 --kernel layer ARGS` ROUNDS times into layer.txt; each
# round's layer rows (scheme, M, us, codes) on one line.
layer_rounds() {
  local rounds="$1" round before
  shift
  for round in $(seq "$rounds"); do
    before=$(grep -c "^layer  " "$out/layer.txt" 2>/dev/null)
    timeout 120 "$build/moeq" bench --trials 5 --kernel layer "$@" >>"$out/layer.txt" 2>&1
    echo "layer round $round rc=$? $(($(date +%s) - t0)) s: $(grep -E "^layer  " "$out/layer.txt" |
      tail -n +$((${before:-0} + 1)) | awk '{print $3, $4, $5, $(NF-4)}' | paste -sd' ')"
  done
}

# ncu_scheme_times "RUN ARGS" SCHEME...: ncu's duration of each kernel of one `moeq run RUN_ARGS --scheme S`
# per scheme into ncu-S.txt (':' as '-'), one line each.
ncu_scheme_times() {
  local args="$1" scheme f
  shift
  for scheme in "$@"; do
    f="$out/ncu-${scheme//:/-}.txt"
    # shellcheck disable=SC2086
    timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run $args --scheme "$scheme" \
      >"$f" 2>&1
    echo "ncu $scheme rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
      sed -n 3,12p | paste -sd' ')"
  done
}

# ncu_step_times "RUN ARGS" M...: ncu's duration of each kernel of one `moeq run RUN_ARGS -M m` per M
# (the applies after the weights' preparation) into ncu-M.txt, one line each.
ncu_step_times() {
  local args="$1" m f
  shift
  for m in "$@"; do
    f="$out/ncu-$m.txt"
    # shellcheck disable=SC2086
    timeout 50 ncu --clock-control none --metrics gpu__time_duration.sum "$build/moeq" run $args -M "$m" >"$f" 2>&1
    echo "ncu $m rc=$? $(($(date +%s) - t0)) s: $(awk '/^  moeq_/{name=$1} /gpu__time_duration.sum/{print name, $NF}' "$f" |
      sed -n 3,10p | paste -sd' ')"
  done
}

# layer_once LABEL PRESET SCHEME M [FLAG...]: one `moeq bench --kernel layer` process (LAYER_TRIALS trials, 5) timing M twice (the first
# layer a process times runs slow); LABEL, the layer, rc and both times appended to layer.txt.
layer_once() {
  local label="$1" preset="$2" scheme="$3" m="$4"
  shift 4
  timeout 60 "$build/moeq" bench --trials "${LAYER_TRIALS:-5}" --kernel layer --preset "$preset" --scheme "$scheme" -M "$m" "$m" "$@" \
    >"$out/l.tmp" 2>&1
  echo "$label $preset $scheme $m rc=$? $(grep -E '^layer  ' "$out/l.tmp" | awk '{print $5}' | paste -sd' ')" >>"$out/layer.txt"
}

# tune_layers SECONDS "PRESET SCHEME M ..." ...: `moeq tune` of each case (at most SECONDS each) into
# tables/PRESET_SCHEME.json, then tables.tar, and its log into tune.txt.
tune_layers() {
  local seconds="$1" case p s
  shift
  mkdir -p "$out/tables"
  for case in "$@"; do
    # shellcheck disable=SC2086
    set -- $case
    p="$1" s="$2"
    shift 2
    timeout "$seconds" "$build/moeq" tune --preset "$p" --scheme "$s" -M "$@" --out "$out/tables/${p}_${s}.json" \
      >>"$out/tune.txt" 2>&1
    echo "tune $p $s rc=$? $(($(date +%s) - t0)) s"
  done
  (cd "$out" && tar cf tables.tar tables && rm -rf tables)
}

# bench_tile_cases "TILE ..." "PRESET SCHEME M ..." ...: GEMM1 and GEMM2 of each case on those tiles, appending
# to sweep.txt (one process per case).
bench_tile_cases() {
  local tiles="$1" c p s
  shift
  for c in "$@"; do
    # shellcheck disable=SC2086
    set -- $c
    p=$1 s=$2
    shift 2
    # shellcheck disable=SC2086
    timeout 150 "$build/moeq" bench --trials 5 --kernel gemm1 gemm2 --preset "$p" --scheme "$s" -M "$@" --tile $tiles \
      >>"$out/sweep.txt" 2>&1
    echo "sweep $c rc=$? $(($(date +%s) - t0)) s"
  done
}

# side LABEL PRESET SCHEME "M..." [ENV=V] [FLAG...]: one process, its layer lines tagged LABEL in steps.txt.
side() {
  local label="$1" preset="$2" scheme="$3" tokens="$4" first
  shift 4
  local envs=()
  while [ $# -gt 0 ] && [[ "$1" == *=* ]]; do envs+=("$1"); shift; done
  first="${tokens%% *}"
  # shellcheck disable=SC2086
  env "${envs[@]}" timeout 90 "$build/moeq" bench --trials 7 --kernel layer --preset "$preset" --scheme "$scheme" \
    -M $first $tokens "$@" >"$out/s.tmp" 2>&1
  echo "rc=$? $label" >>"$out/steps.txt"
  grep -E '^layer  ' "$out/s.tmp" | tail -n +2 | sed "s/^/$label /" >>"$out/steps.txt"
}

# ab LABEL_A LABEL_B PRESET SCHEME "M..." "A-ARGS" "B-ARGS": A, B, B, A (two rounds, one process each).
ab() {
  local a="$1" b="$2" p="$3" s="$4" m="$5"
  # shellcheck disable=SC2086
  side "$a" "$p" "$s" "$m" $6; side "$b" "$p" "$s" "$m" $7; side "$b" "$p" "$s" "$m" $7; side "$a" "$p" "$s" "$m" $6
  echo "ab $a/$b $p $s $(($(date +%s) - t0)) s"
}

# tests_and_warmup FILTER SECONDS: gpu_tests on no extra tiles with FILTER, each test's verdict on one line, then
# moeq_gpu_warmup_test (60 s) into warmup.txt.
tests_and_warmup() {
  gpu_tests "" "$1" "$2"
  grep -E "^\[  FAILED|^\[       OK" "$out/gpu_tests.txt" | awk '{print $2, $3, $4, $5}' | paste -sd' ' | head -c 2500
  echo
  timeout 60 "$build/moeq_gpu_warmup_test" >"$out/warmup.txt" 2>&1
  echo "warmup rc=$? $(($(date +%s) - t0)) s"
  grep -E "^\[  FAILED|^\[       OK|PASSED" "$out/warmup.txt"
}

# run_as O|N CMD...: CMD with (N) or without (O) the MX scales word on `moeq bench`'s weights
# (MOEQ_MX_SCALES_AT_MOST_TWO, docs/env.md).
run_as() {
  if [ "$1" = O ]; then shift; MOEQ_MX_SCALES_AT_MOST_TWO=0 "$@"; else shift; "$@"; fi
}

# tune_update_tables "PRESET[/SCHEME]:M,M:TILE,TILE[:...] ...": `moeq tune --update` of each preset's shipped table for
# SCHEME (default mxfp4) over those M and candidate tiles (--min-gain 3; TUNE_TIMEOUT seconds each, default 150), the
# new tables and tune.txt into out, and whether each table changed. Fields past the third are the caller's.
tune_update_tables() {
  local item target tokens tiles rest preset scheme
  for item in $1; do
    IFS=: read -r target tokens tiles rest <<<"$item"
    preset="${target%%/*}" scheme=mxfp4
    [ "$target" != "$preset" ] && scheme="${target#*/}"
    tokens="$(echo "$tokens" | tr ',' ' ')" tiles="$(echo "$tiles" | tr ',' ' ')"
    # shellcheck disable=SC2086
    timeout "${TUNE_TIMEOUT:-150}" "$build/moeq" tune --preset "$preset" --scheme "$scheme" -M $tokens --candidates $tiles \
      --min-gain 3 --update "$root/tuning/sm_90/${preset}_${scheme}.json" --out "$out/${preset}_${scheme}.json" \
      >>"$out/tune.txt" 2>&1
    echo "tune $preset $scheme rc=$? $(($(date +%s) - t0)) s"
    cmp -s "$root/tuning/sm_90/${preset}_${scheme}.json" "$out/${preset}_${scheme}.json" && echo "$preset $scheme: table unchanged"
  done
  grep -v "^tune: wrote" "$out/tune.txt"
}

# steps_old_new PRESET SCHEME "M ..." NEW_TABLE FILE: whole steps with the shipped table (O) and NEW_TABLE (N), O N N O,
# appended to out/FILE; a round that would start past STEPS_DEADLINE seconds (default 540) is skipped. Without a shipped
# table file, O has no --tuning (the binary's embedded table, else the planner's rules). Each round stops after STEPS_TIMEOUT seconds (default 60).
steps_old_new() {
  local who table
  for who in O N N O; do
    [ $(($(date +%s) - t0)) -gt "${STEPS_DEADLINE:-540}" ] && { echo "skipped steps $1 $2 $who: no time left"; continue; }
    table="$root/tuning/sm_90/${1}_${2}.json"
    [ "$who" = N ] && table="$4"
    # NOTE: without a shipped table file, O runs with no --tuning: the planner's rules, unless the binary embeds
    # a table for the layer (then O is that table). A missing new table is an error, never a silent O.
    local tuning_args=(--tuning "$table")
    if [ ! -f "$table" ]; then
      [ "$who" = N ] && { echo "steps $1 $2: the new table $4 is missing"; return 1; }
      tuning_args=()
    fi
    # shellcheck disable=SC2086
    timeout "${STEPS_TIMEOUT:-60}" "$build/moeq" bench --trials 5 --kernel layer --preset "$1" --scheme "$2" -M $3 \
      "${tuning_args[@]}" >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v s="$who" '{print s, $2, $3, $4, $5}' >>"$out/$5"
    grep -E "^copy" "$out/o.tmp" | head -1
  done
  echo "steps $1 $2 $(($(date +%s) - t0)) s"
}

# clocks_start FILE: nvidia-smi samples every 20 ms (timestamp, SM clock, power, clock event reasons) into $out/FILE
# until clocks_stop; clocks_mark NAME starts a phase in $out/phases.txt; scripts/device/clock_summary.py FILE
# phases.txt prints the clock per phase. NOTE: a bench process spends most of its seconds setting up weights, at an
# idle clock: a phase's minimum and its share under 1900 MHz say more than its median (session 40, call 2).
clocks_start() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 20 \
    >"$out/$1" 2>&1 &
  clocks_pid=$!
}
clocks_mark() { echo "$(date +%Y/%m/%d\ %H:%M:%S.%N) $1" >>"$out/phases.txt"; }
clocks_stop() { kill "$clocks_pid" 2>/dev/null; wait "$clocks_pid" 2>/dev/null; }

# layer_steps TABLE PRESET SCHEME "M ..." "ORDER": whole steps (`moeq bench --kernel layer`, 5 trials) appended to
# steps.txt as "TABLE WHO preset scheme M us MB %copy", one process per letter of ORDER: O = $old_build, N = $build,
# Z = $build with MOEQ_SELF_ROUTE=0, F = $build with MOEQ_FUSED_REDUCE=0 (session 51's build with session 50's fused
# reduce; later builds ignore it), A = $build with MOEQ_FUSED_ACTIVATION=0, B = $build with both, W = $build with
# MOEQ_FUSED_ACTIVATION_MAX_ROWS=$WIDE_ROWS (default 1024: the direct tiles fuse at up to that many slots), R = $build with
# MOEQ_FOLD_ORDER=0 (GEMM1's MMA-order pass in its own launch, not folded into the routing's), C = $build with
# MOEQ_FOLD_ORDER=2 (folded on the chunked routing path too), E = $build with --fp8-wgmma (the e4m3 wgmma body, canonical
# codes), Q = $build with MOEQ_GEMM2_QUANTIZES_MAX_ROWS=0 (FP8 per token: the activation-quantize kernel between the
# GEMMs at every M); STEP_TIMEOUT seconds a process (60), STEP_CODES the --codes list (the bench's default). TABLE planner adds
# --no-shipped-tuning (shipped: the shipped tables); a TABLE ending in .json adds --tuning TABLE (its rows replace the
# shipped table's at the M they cover) and is recorded by its file name.
layer_steps() {
  local flags="" who bin self fused act max_rows extra
  [ "$1" = planner ] && flags="--no-shipped-tuning"
  case "$1" in *.json) flags="--tuning $1" ;; esac
  [ -n "${STEP_CODES:-}" ] && flags="$flags --codes $STEP_CODES"
  for who in $5; do
    bin="$build/moeq" self=1 fused=1 act=1 order=1 max_rows="" extra="" quantizing_rows=""
    [ "$who" = O ] && bin="$old_build/moeq"
    [ "$who" = Z ] && self=0
    [ "$who" = F ] && fused=0
    [ "$who" = A ] && act=0
    [ "$who" = B ] && fused=0 act=0
    [ "$who" = W ] && max_rows="${WIDE_ROWS:-1024}"
    [ "$who" = R ] && order=0
    [ "$who" = C ] && order=2
    [ "$who" = E ] && extra="--fp8-wgmma"
    [ "$who" = Q ] && quantizing_rows=0
    [ "$who" = P ] && bin="$old_build/moeq" extra="--fp8-wgmma"
    # NOTE: only W sets MOEQ_FUSED_ACTIVATION_MAX_ROWS; the other letters run the library's own limit.
    # shellcheck disable=SC2086
    env -u MOEQ_FUSED_ACTIVATION_MAX_ROWS -u MOEQ_GEMM2_QUANTIZES_MAX_ROWS ${max_rows:+MOEQ_FUSED_ACTIVATION_MAX_ROWS=$max_rows} \
      ${quantizing_rows:+MOEQ_GEMM2_QUANTIZES_MAX_ROWS=$quantizing_rows} \
      MOEQ_SELF_ROUTE=$self MOEQ_FUSED_REDUCE=$fused MOEQ_FUSED_ACTIVATION=$act MOEQ_FOLD_ORDER=$order timeout "${STEP_TIMEOUT:-60}" "$bin" bench --trials 5 \
      --kernel layer $flags $extra --preset "$2" --scheme "$3" -M $4 >"$out/o.tmp" 2>&1
    grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' |
      awk -v w="$who" -v t="$(basename "$1")" '{print t, w, $2, $3, $4, $5, $6, $8}' >>"$out/steps.txt"
    grep -E "^copy" "$out/o.tmp" | head -1
  done
  echo "steps $1 $2 $3 $(($(date +%s) - t0)) s"
}

# layer_verify "PRESET SCHEME M ..." ...: `moeq verify` of each job with $build into verify.txt (activations: silu, or
# VERIFY_ACTIVATIONS), then the pass count and any failure.
layer_verify() {
  local job p s
  for job in "$@"; do
    # shellcheck disable=SC2086
    set -- $job
    p="$1" s="$2"
    shift 2
    # shellcheck disable=SC2086
    timeout 100 "$build/moeq" verify --preset "$p" --scheme "$s" --activation ${VERIFY_ACTIVATIONS:-silu} -M "$@" \
      >>"$out/verify.txt" 2>&1
    echo "verify $p $s rc=$? $(($(date +%s) - t0)) s"
  done
  grep -cE "^pass" "$out/verify.txt"
  grep -E "^FAIL" "$out/verify.txt" | head
}

# self_route_gpu_tests: the self-routed GEMM1's bit-equality test, the routing's edge cases, graph capture and the
# warm-up test with $build into gpu_tests.txt, and their summary.
self_route_gpu_tests() {
  filtered_gpu_tests 'MoeGemmGpu.SelfRouted*:ExpertsGpu.OddShapesExpertMapAndBias:ExpertsGpu.BadRoutingValues*:ExpertsGpu.GraphCapture*' 150
}

# filtered_gpu_tests FILTER SECONDS: moeq_gpu_tests of that gtest filter and the warm-up test with $build into
# gpu_tests.txt, and their summary.
filtered_gpu_tests() {
  {
    timeout "$2" "$build/moeq_gpu_tests" --gtest_filter="$1"
    echo "gpu tests rc=$?"
    timeout 60 "$build/moeq_gpu_warmup_test"
    echo "warmup test rc=$?"
  } >"$out/gpu_tests.txt" 2>&1
  echo "gpu tests $(($(date +%s) - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|rc=" "$out/gpu_tests.txt" | head -14
}

# diag_steps TABLE LETTER LABEL D...: Qwen3-30B-A3B MXFP4 x FP8 per-token steps at M = 4096 on TABLE (layer_steps
# letter LETTER, so E or P), one per MOEQ_DIAG_WS value D (timing only), each headed "LABEL diag D" in steps.txt.
diag_steps() {
  local table="$1" letter="$2" label="$3" d
  shift 3
  for d in "$@"; do
    echo "$label diag $d" >>"$out/steps.txt"
    MOEQ_DIAG_WS=$d layer_steps "$table" qwen3-30b-a3b mxfp4:fp8-token 4096 "$letter"
  done
}

# qwen3_baseline_steps: the Qwen3-30B-A3B MXFP4 M = 4096 step on the FP8 values path and with bf16 activations (N,
# shipped tables), the baselines of the e4m3 body.
qwen3_baseline_steps() {
  layer_steps shipped qwen3-30b-a3b mxfp4:fp8-token 4096 N
  layer_steps shipped qwen3-30b-a3b mxfp4 4096 N
}

# ncu_qwen3_times LABEL BINARY RUN_ARG...: ncu's duration of each kernel of one Qwen3-30B-A3B `moeq run -M 4096
# --codes canonical RUN_ARG...` (CSV into ncu_LABEL.csv), printed on one line.
ncu_qwen3_times() {
  local label="$1" binary="$2"
  shift 2
  timeout 120 ncu --clock-control none --csv --metrics gpu__time_duration.sum \
    "$binary" run --preset qwen3-30b-a3b "$@" --codes canonical -M 4096 >"$out/ncu_$label.csv" 2>&1
  echo "ncu $label rc=$? $(($(date +%s) - t0)) s"
  grep -E '"moeq_' "$out/ncu_$label.csv" | awk -F'","' '{print $5, $(NF)}' | sed 's/"//g' | head -8 | tr '\n' ';'
  echo
}

# compile_layers_bg MOEQ JOBS PRESET SCHEME...: `MOEQ compile -j JOBS` of each scheme's layer, a background process
# each, into compile_<binary's folder>_<scheme>.txt; the caller waits, then compiled_summary.
compile_layers_bg() {
  local moeq="$1" jobs="$2" preset="$3" s
  shift 3
  for s in "$@"; do
    "$moeq" compile -j "$jobs" --preset "$preset" --scheme "$s" \
      >"$out/compile_$(basename "$(dirname "$moeq")")_${s//:/-}.txt" 2>&1 &
  done
}
compiled_summary() { echo "compiled $(($(date +%s) - t0)) s: $(tail -qn1 "$out"/compile_*.txt | paste -sd';')"; }

# ncu_kernel_medians CSV: ncu's durations (`--csv --metrics gpu__time_duration.sum` of a `moeq run`) as one line: each
# kernel of the repeated apply (weight preparation left out) and its median over the applies, then their sum.
ncu_kernel_medians() {
  python3 - "$1" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 12]
h = rows[0]
ki, mi, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
seq = [(r[ki], float(r[vi].replace(",", ""))) for r in rows[1:] if r[mi] == "gpu__time_duration.sum" and "prepare" not in r[ki]]
names = [n for n, _ in seq]
p = next((p for p in range(2, 10) if names[:p] == names[p:2 * p]), len(names))
n = len(seq) // p
med = [sorted(seq[j * p + i][1] for j in range(n))[n // 2] / 1000 for i in range(p)]
print("  ".join(f"{names[i][5:]} {med[i]:.2f}" for i in range(p)), f"| sum {sum(med):.2f} us (n={n})")
PY
}
