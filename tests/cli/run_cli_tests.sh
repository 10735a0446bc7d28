#!/usr/bin/env bash
# End-to-end checks of the moeq CLI: exit codes, messages, files. Usage: run_cli_tests.sh MOEQ
set -u
moeq="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# expect NAME EXIT_CODE PATTERN -- command...: the command exits with EXIT_CODE and its
# output (stdout + stderr) matches the extended regex PATTERN.
expect() {
  local name="$1" code="$2" pattern="$3"
  shift 4
  local output rc
  output="$("$@" 2>&1)"
  rc=$?
  if [ "$rc" -eq "$code" ] && grep -Eq -- "$pattern" <<<"$output"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: $name (exit $rc, wanted $code; pattern '$pattern')"
    echo "$output" | head -20 | sed 's/^/    /'
  fi
}

hash_of() { grep -E "^$1 " | sed -E 's/.*fnv1a ([0-9a-f]+).*/\1/'; }

expect "info lists 16 pairs" 0 "supported \(weight, activation\) pairs \(16\)" -- "$moeq" info
expect "info legal combination" 0 "legal: yes" -- "$moeq" info --preset qwen3-30b-a3b --scheme mxfp4:fp8-token
expect "info illegal pair" 1 "\(nvfp4, mxfp8\) is not a supported" -- "$moeq" info --scheme nvfp4:mxfp8
expect "info K not a multiple of the group" 1 "hidden_size \(K\) = 2880 is not a multiple of 128" -- \
  "$moeq" info --preset gpt-oss-20b --scheme int4-g128
# -M: the CUDA plan without a GPU (an H200's by default). Tuning tables are keyed by routed rows (M x top_k).
expect "info -M plans each M" 0 "M = 256 \(valid_shape_m 2048\): layout indexed, block_m [0-9]+, (table entry|the planner)" -- \
  "$moeq" info --preset qwen3-30b-a3b --scheme mxfp4 -M 1 256 --arch sm_90a --sms 132
cat >"$tmp/o2.json" <<'JSON'
{"arch": "sm_90", "layer": "cli test", "entries": [{"min_m": 1024, "max_m": 3072, "block_m": 24,
 "gemm1_tile": "24x256/1x8x1/4/o2/p/t", "gemm2_tile": "24x256/1x8x1/4/o2/p/t"}]}
JSON
for want in "M = 256 \(valid_shape_m 2048\): layout indexed, block_m 24, table entry \(1024, 3072\]" \
  "M = 128 \(valid_shape_m 1024\): layout indexed, block_m [0-9]+, the planner's rules" \
  "^  gemm1 24x256/1x8x1/4/o2/p/t bf16$"; do
  expect "info -M table keyed by routed rows: $want" 0 "$want" -- \
    "$moeq" info --preset qwen3-30b-a3b --scheme mxfp4 -M 128 256 --tuning "$tmp/o2.json" --arch sm_90a
done
expect "info -M names each GEMM" 0 "^  gemm2 [0-9]+x[0-9]+/[0-9]+x[0-9]+x[0-9]+/[0-9]+[a-z0-9/]* bf16$" -- \
  "$moeq" info --preset qwen3-30b-a3b --scheme mxfp4 -M 4096 --arch sm_90a
expect "info -M on sm_80 runs mma.sync tiles" 0 "^  gemm1 [0-9]+x[0-9]+/[0-9]+x[0-9]+x[0-9]+/[0-9]+(/[ko][0-9]+)*(/r)? bf16$" -- \
  "$moeq" info --preset qwen3-30b-a3b --scheme int4-g128 -M 4096 --arch sm_80 --no-shipped-tuning
expect "info -M planner without a table" 0 "tuning: none, the planner's rules" -- \
  "$moeq" info --preset qwen3-30b-a3b --scheme mxfp4 -M 16 --no-shipped-tuning
expect "info -M refuses masked" 1 "-M plans standard input" -- \
  "$moeq" info --preset qwen3-30b-a3b --scheme mxfp4 -M 16 --layout masked
expect "info -M bad arch" 1 "--arch = 'sm_70' is not one of" -- "$moeq" info --preset tiny -M 1 --arch sm_70
expect "run tiny" 0 "out +sum .* fnv1a [0-9a-f]{16}" -- "$moeq" run --preset tiny --tokens 7
expect "run --check" 0 "check +vs float64 oracle: rel err" -- "$moeq" run --preset tiny --tokens 7 --check
# Refused on every machine (f16_accum is not on the CUDA backend; here there is no device either).
expect "cuda backend refuses" 1 "backend = cuda: " -- "$moeq" run --preset tiny --scheme int4-g128:f16 --f16-accum \
  --backend cuda
expect "unknown preset" 1 "preset 'nope' is unknown; known presets: .*tiny" -- "$moeq" run --preset nope
expect "bad scheme" 1 "scheme 'int4:xyz'" -- "$moeq" run --preset tiny --scheme int4:xyz
expect "bad layout" 1 "layout = 'sideways' is unknown" -- "$moeq" run --preset tiny --layout sideways
expect "bad flag" 109 "" -- "$moeq" run --no-such-flag

# The three layouts give the same [M, K] result on the CPU backend, bit for bit.
indexed="$("$moeq" run --preset tiny --tokens 33 --layout indexed --ep-size 7 --ep-rank 0 --scheme mxfp4:mxfp4 2>&1 | hash_of out)"
contiguous="$("$moeq" run --preset tiny --tokens 33 --layout contiguous --ep-size 7 --ep-rank 0 --scheme mxfp4:mxfp4 2>&1 | hash_of out)"
masked="$("$moeq" run --preset tiny --tokens 33 --layout masked --ep-size 7 --ep-rank 0 --scheme mxfp4:mxfp4 2>&1 | hash_of combined)"
if [ -n "$indexed" ] && [ "$indexed" = "$contiguous" ] && [ "$indexed" = "$masked" ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: layouts differ: '$indexed' '$contiguous' '$masked'"
fi

# --no-fp8-tensor-cores is accepted and, on the CPU backend (no tensor cores), changes nothing.
fp8_on="$("$moeq" run --preset tiny --tokens 5 --scheme fp8-channel:fp8-token --backend cpu 2>&1 | hash_of out)"
fp8_off="$("$moeq" run --preset tiny --tokens 5 --scheme fp8-channel:fp8-token --backend cpu --no-fp8-tensor-cores 2>&1 |
  hash_of out)"
if [ -n "$fp8_on" ] && [ "$fp8_on" = "$fp8_off" ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: --no-fp8-tensor-cores changed the CPU result: '$fp8_on' vs '$fp8_off'"
fi

# Save a problem, run it from the file, and get the same output as the generated run.
expect "save problem" 0 "saved +problem to" -- "$moeq" run --preset tiny --tokens 5 --scheme nvfp4:fp8-token \
  --save-problem "$tmp/p.safetensors"
generated="$("$moeq" run --preset tiny --tokens 5 --scheme nvfp4:fp8-token 2>&1 | hash_of out)"
from_file="$("$moeq" run --weights "$tmp/p.safetensors" --inputs "$tmp/p.safetensors" --output "$tmp/out.safetensors" 2>&1 | hash_of out)"
if [ -n "$generated" ] && [ "$generated" = "$from_file" ] && [ -s "$tmp/out.safetensors" ]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: file run differs: '$generated' vs '$from_file'"
fi

# A truncated file is refused with its name, and no output is written.
head -c 1000 "$tmp/p.safetensors" >"$tmp/cut.safetensors"
expect "truncated file" 1 "cut.safetensors" -- "$moeq" run --weights "$tmp/cut.safetensors" \
  --inputs "$tmp/cut.safetensors" --output "$tmp/never.safetensors"
if [ -e "$tmp/never.safetensors" ]; then failed=$((failed + 1)); echo "FAIL: output written on error"; else passed=$((passed + 1)); fi
expect "weights without inputs" 1 "--weights and --inputs go together" -- "$moeq" run --weights "$tmp/p.safetensors"

# Tuning tables: taken by run (any backend), refused with the entry and the value when illegal.
cat >"$tmp/tuned.json" <<'JSON'
{"arch": "sm_90", "layer": "tiny", "entries": [{"min_m": 0, "max_m": 64, "block_m": 32,
  "gemm1_tile": "32x128/1x8x1/4", "gemm2_tile": "32x128/1x8x1/4"}]}
JSON
sed 's/"block_m": 32/"block_m": 16/' "$tmp/tuned.json" >"$tmp/mismatched.json"
expect "run --tuning" 0 "check +vs float64 oracle: rel err" -- "$moeq" run --preset tiny --tokens 7 --check \
  --tuning "$tmp/tuned.json"
expect "run --tuning illegal" 1 "entries\[0\] \(0, 64\]: gemm1_tile = '32x128/1x8x1/4' has 32-row blocks, not block_m = 16" -- \
  "$moeq" run --preset tiny --tokens 7 --tuning "$tmp/mismatched.json"
expect "run --tuning missing" 1 "cannot read $tmp/none.json" -- "$moeq" run --preset tiny --tuning "$tmp/none.json"
expect "tune --layout bad" 1 '--layout = "sideways" is not indexed, contiguous or masked' -- \
  "$moeq" tune --preset tiny --layout sideways
echo '{"arch": "sm_90", "key": "E=8 some other layer", "entries": []}' >"$tmp/other_layer.json"
expect "tune --update of another layer" 1 'is the table of "E=8 some other layer", not of this layer' -- \
  "$moeq" tune --preset tiny --update "$tmp/other_layer.json"
expect "tune --update illegal" 1 "--update $tmp/mismatched.json cannot serve .*block_m = 16" -- \
  "$moeq" tune --preset tiny --update "$tmp/mismatched.json"
expect "tune -M 0" 1 "--tokens: M = 0 is not a token count" -- "$moeq" tune --preset tiny -M 4 0
expect "tune --steps --layout masked" 1 "--steps times the step on indexed input; --layout = \"masked\" cannot be timed that way" -- \
  "$moeq" tune --preset tiny --steps --layout masked
# A layer with no preset, from a JSON file of the presets' format: odd sizes, E not a power of two.
cat >"$tmp/odd.json" <<'JSON'
{"name": "odd-layer", "num_experts": 5, "top_k": 2, "hidden_size": 160, "intermediate_size": 96,
 "activation": "swiglu-oai", "interleaved_gate_up": true, "default_scheme": "mxfp4:bf16", "bias": true}
JSON
expect "preset file info" 0 "E=5 K=160 I=96 top_k=2 mxfp4:bf16 bf16 swiglu-oai interleaved bias=f32" -- \
  "$moeq" info --preset "$tmp/odd.json"
expect "preset file illegal scheme" 1 "hidden_size \(K\) = 160 is not a multiple of 128" -- \
  "$moeq" info --preset "$tmp/odd.json" --scheme int4-g128
expect "preset file run --check" 0 "check +vs float64 oracle: rel err" -- \
  "$moeq" run --preset "$tmp/odd.json" --tokens 7 --check --backend cpu
expect "preset file missing" 1 "preset file '$tmp/none.json' cannot be read" -- "$moeq" run --preset "$tmp/none.json"
echo '{"name": "x", "num_experts": 5}' >"$tmp/short.json"
expect "preset file incomplete" 1 "preset file '$tmp/short.json': field 'top_k' is missing" -- \
  "$moeq" info --preset "$tmp/short.json"
# The odd-size layers of bench/odd-shapes/ (the GPU checks them with scripts/device/v131_odd_shapes.sh): each parses
# and is legal for its scheme; the small one runs against the oracle on the CPU.
shapes="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../bench/odd-shapes" && pwd)"
for f in "$shapes"/*.json; do
  expect "odd shape $(basename "$f")" 0 "legal: yes" -- "$moeq" info --preset "$f" --scheme mxfp4
done
expect "odd shape run --check" 0 "check +vs float64 oracle: rel err" -- \
  "$moeq" run --preset "$shapes/k704-i352.json" --tokens 7 --check --backend cpu
expect "compile --jobs -1" 1 "--jobs = -1 must be >= 0" -- "$moeq" compile --preset tiny --arch sm_80 --jobs -1
# The candidates of a layer: 512-channel tiles only for MX weights; an illegal named tile is refused by name.
mx_tiles="$("$moeq" compile --preset qwen3-30b-a3b --scheme mxfp4 --tile candidates --list-tiles 2>&1)"
int4_tiles="$("$moeq" compile --preset qwen3-30b-a3b --scheme int4-g128 --tile candidates --list-tiles 2>&1)"
expect "compile --list-tiles mxfp4 has 512-channel tiles" 0 "^48x512/1x8x1/4/p$" -- echo "$mx_tiles"
expect "compile --list-tiles int4 has none" 0 "^[0-9]+ lines, 0 of 512 channels$" -- \
  echo "$(grep -c . <<<"$int4_tiles") lines, $(grep -c 'x512/' <<<"$int4_tiles") of 512 channels"
expect "compile --list-tiles int4 is most candidates" 0 "^true$" -- \
  bash -c "[ $(grep -c . <<<"$int4_tiles") -ge 100 ] && [ $(grep -c . <<<"$int4_tiles") -lt $(grep -c . <<<"$mx_tiles") ] && echo true"
expect "compile --list-tiles names a tile" 0 "^24x128/1x4x1/4/r$" -- \
  "$moeq" compile --preset tiny --tile 24x128/1x4x1/4/r --list-tiles
expect "compile refuses an illegal tile" 1 "512-channel tiles take MX weights" -- \
  "$moeq" compile --preset tiny --scheme int4-g128 --tile 48x512/1x8x1/4/p --list-tiles
expect "compile --codes names the choices" 1 "--codes = 'packed' is not both, prepared or canonical" -- \
  "$moeq" compile --preset tiny --codes packed --list-tiles
expect "compile --mx-word on needs MX weights" 1 "--mx-word on: int4 weights have no MX scales" -- \
  "$moeq" compile --preset tiny --scheme int4-g128 --mx-word on --list-tiles
expect "compile --scales names the choices" 1 "--scales = 'odd' is not both, unaligned or aligned" -- \
  "$moeq" compile --preset tiny --scales odd --list-tiles
# Without a device `moeq tune` says so (with one it would tune: not here).
if "$moeq" info 2>/dev/null | grep -q "cuda (no CUDA device"; then
  expect "tune needs a device" 1 "moeq tune needs a CUDA device" -- "$moeq" tune --preset tiny
fi

# Found by an audit of the CLI (session 45): each refused by name, where it ran or wrote over a file before.
expect "info -M past the row limit" 1 "-M: num_tokens = 3074457345618258603 with top_k = 8 routes 2\^31 or more rows" -- \
  "$moeq" info --preset qwen3-30b-a3b -M 3074457345618258603
expect "info --sms 0" 1 "--sms = 0 must be positive" -- "$moeq" info --preset tiny -M 1 --sms 0
expect "info --arch without -M" 107 "--arch requires --tokens" -- "$moeq" info --preset tiny --arch sm_90a
expect "info bad layout" 1 "--layout = 'sideways' is unknown" -- "$moeq" info --preset tiny --layout sideways
expect "run --codes" 1 "--codes = 'nope' is not prepared or canonical" -- "$moeq" run --preset tiny -M 3 --codes nope
expect "bench --codes" 1 "--codes = 'nope' is not prepared or canonical" -- "$moeq" bench --kernel layer --preset tiny -M 3 --codes nope
expect "verify --codes" 1 "--codes = 'nope' is not prepared or canonical" -- "$moeq" verify --preset tiny -M 3 --codes nope
expect "verify --tuning" 1 "tuning table: cannot read /nonexistent/t.json" -- \
  "$moeq" verify --preset tiny -M 3 --tuning /nonexistent/t.json
expect "verify --layout" 1 "--layout = 'sideways' is unknown \\(indexed, contiguous, masked or auto\\)" -- \
  "$moeq" verify --preset tiny -M 3 --layout indexed sideways
expect "run --seed -1" 1 "--seed = '-1' is not an integer in 0 .. 18446744073709551615" -- "$moeq" run --preset tiny --seed -1
expect "run --seed 2^64" 1 "--seed = '18446744073709551616' is not" -- "$moeq" run --preset tiny --seed 18446744073709551616
expect "run -o over --weights" 1 "--output = '.*' is the file --weights reads" -- \
  "$moeq" run --weights "$tmp/p.safetensors" --inputs "$tmp/p.safetensors" -o "$tmp/../$(basename "$tmp")/p.safetensors"
[ -s "$tmp/p.safetensors" ] && passed=$((passed + 1)) || { failed=$((failed + 1)); echo "FAIL: -o wrote over the problem"; }
expect "run -o over --save-problem" 1 "is the file --save-problem writes" -- \
  "$moeq" run --preset tiny -M 2 --save-problem "$tmp/s.st" -o "$tmp/s.st"
expect "run masked on standard input" 1 "layout = masked takes batched input .* holds standard input" -- \
  "$moeq" run --weights "$tmp/p.safetensors" --inputs "$tmp/p.safetensors" --layout masked
expect "save M = 0" 0 "saved +problem to" -- "$moeq" run --preset tiny -M 0 --save-problem "$tmp/zero.st"
expect "run the saved M = 0" 0 "over 0 routed rows" -- "$moeq" run --weights "$tmp/zero.st" --inputs "$tmp/zero.st"
echo '{"arch": "sm_90", "key": "E=8 some other layer", "entries": [{"min_m": 0, "max_m": 64, "block_m": 32,
  "gemm1_tile": "32x128/1x8x1/4", "gemm2_tile": "32x128/1x8x1/4"}]}' >"$tmp/foreign.json"
expect "run --tuning of another layer" 1 "tuned for another layer" -- "$moeq" run --preset tiny --tuning "$tmp/foreign.json"
expect "info --tuning of another layer" 1 "tuned for another layer" -- "$moeq" info --preset tiny --tuning "$tmp/foreign.json"
sed 's/"top_k": 2/"top_k": 0/' "$tmp/odd.json" >"$tmp/top_k0.json"
expect "info -M on an illegal layer" 1 "top_k = 0 is outside" -- "$moeq" info --preset "$tmp/top_k0.json" -M 1
sed 's/"block_m": 32,/"block_m": 32, "blockm": 8,/' "$tmp/tuned.json" >"$tmp/misspelt.json"
expect "tuning table unknown field" 1 "field 'blockm' is unknown" -- "$moeq" run --preset tiny --tuning "$tmp/misspelt.json"
sed 's/"bias": true/"bais": true/' "$tmp/odd.json" >"$tmp/misspelt_preset.json"
expect "preset file unknown field" 1 "field 'bais' is unknown" -- "$moeq" info --preset "$tmp/misspelt_preset.json"
: >"$tmp/not_a_dir"
# (Or, on a machine without NVRTC, refused for that.)
expect "compile into a file" 1 "could not be written to the cache at $tmp/not_a_dir|moeq compile needs NVRTC" -- \
  env MOEQ_CACHE_DIR="$tmp/not_a_dir" "$moeq" compile --preset tiny --arch sm_80 --tile 8x128/1x4x1/4/o4/r
expect "compile with the disk cache off" 1 "the disk cache is off \(MOEQ_DISABLE_CACHE\)|moeq compile needs NVRTC" -- \
  env MOEQ_DISABLE_CACHE=1 "$moeq" compile --preset tiny --arch sm_80
expect "compile --list-tiles names each tile once" 0 "^1$" -- bash -c \
  "\"$moeq\" compile --preset tiny --tile 24x128/1x4x1/4/r 24x128/1x4x1/4/r --list-tiles | grep -c ."
expect "tune names an unsupported pair" 1 "\(nvfp4, mxfp8\) is not a supported" -- "$moeq" tune --preset tiny --scheme nvfp4:mxfp8
sed 's/"num_experts": 5,/"num_experts": 5, "num_global_experts": 10,/' "$tmp/odd.json" >"$tmp/shard.json"
expect "run a rank's share without --ep-size" 1 "holds E = 5 of E_g = 10 experts, but --ep-size = 1 .* give --ep-size 2" -- \
  "$moeq" run --preset "$tmp/shard.json" -M 3
expect "run a rank's share with --ep-size" 0 "check +vs float64 oracle" -- \
  "$moeq" run --preset "$tmp/shard.json" -M 3 --ep-size 2 --ep-rank 1 --check --backend cpu
expect "an empty text value" 105 "--scheme: the value is empty" -- "$moeq" run --preset tiny --scheme ''
expect "bench --trials 0" 1 "--trials = 0 must be at least 1" -- "$moeq" bench --trials 0
expect "tune --min-gain nan" 1 "--min-gain = nan is not a percentage" -- "$moeq" tune --preset tiny --min-gain nan
expect "tune -o unwritable" 1 "--out = '$tmp/none/t.json': its directory $tmp/none is missing" -- \
  "$moeq" tune --preset tiny -o "$tmp/none/t.json"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
