#!/usr/bin/env bash
# Issue 6's one open step loss, gpt-oss-120b MXFP4 at M = 2048 (moeq 1.01-1.05x Humming's step less its align):
# session 40 saw moeq's step run under the SW power cap (1755-1770 MHz against 1980). Is Humming's step under the same
# cap? Both steps, same call, nvidia-smi sampled every 20 ms with a phase mark per step and around Humming's timed replays
# (humming_layer.py writes MOEQ_PHASES marks; clock_summary.py prints the
# clock per phase); M = 1024 as the uncapped control. Humming's wheels and its NVRTC cache come as in v93.
# Usage: v130_step_clocks.sh BUILD HUMMING_CACHE_TXZ   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tar xJf "$2" -C /tmp
mkdir -p "$out/humming_layer"
clocks_start smi.csv
for m in 2048 1024; do
  clocks_mark "moeq-step-M$m"
  timeout 60 "$build/moeq" bench --trials 9 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M $m \
    >>"$out/moeq_layer.txt" 2>&1
  clocks_mark "idle-after-moeq-M$m"
  sleep 2
  clocks_mark "humming-step-M$m"
  MOEQ_PHASES="$out/phases.txt" HUMMING_TIMEOUT=150 OUT="$out/humming_layer" bash "$root/scripts/device/humming_anchor.sh" --layer \
    --preset gpt-oss-120b --scheme mxfp4 --tokens $m >>"$out/humming_layer/log.txt" 2>&1
  clocks_mark "idle-after-humming-M$m"
  sleep 2
done
clocks_mark end
clocks_stop
grep -E "^layer" "$out/moeq_layer.txt"
tail -n 6 "$out/humming_layer/humming.txt" | cut -c1-160
python3 "$root/scripts/device/clock_summary.py" "$out/smi.csv" "$out/phases.txt"
echo "done $(($(date +%s) - t0)) s"
