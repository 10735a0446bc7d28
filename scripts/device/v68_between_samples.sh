#!/usr/bin/env bash
# Session 30, call 6: the shipped tables against the planner's rules at M between the powers of two the
# tables were sampled at (call 5 found a stale entry there), one process per side, shipped first, then a
# second round planner first while time is left.
# Usage: v68_between_samples.sh BUILD SECONDS   (env OUT)
# shellcheck source=scripts/device/evidence_lib.sh
source "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
limit="$2"
cases=("qwen3-30b-a3b mxfp4|3 12 48 96 192 320 640 1536 3072" "gpt-oss-120b mxfp4|3 12 48 96 192 384 640 3072"
       "qwen3-30b-a3b int4-g128|3 12 48 96 192 320 640 1536 3072")
for round in 1 2; do
  for c in "${cases[@]}"; do
    [ $(($(date +%s) - t0)) -gt "$limit" ] && break 2
    IFS='|' read -r ps m <<<"$c"
    # shellcheck disable=SC2086
    set -- $ps
    if [ $round = 1 ]; then
      side shipped "$1" "$2" "$m"; side planner "$1" "$2" "$m" --no-shipped-tuning
    else
      side planner "$1" "$2" "$m" --no-shipped-tuning; side shipped "$1" "$2" "$m"
    fi
    echo "round $round $ps $(($(date +%s) - t0)) s"
  done
done
awk '{print $1, $3, $4, $5, $6}' "$out/steps.txt"
