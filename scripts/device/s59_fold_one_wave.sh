#!/usr/bin/env bash
# docs/experiments/2026-12-06-fold-order-one-wave.patch (at 262637d; measured and removed in session 59): the order
# fold's grid one CTA short of two an SM, so that
# route_count's own CTA fits the same wave. Whole steps where the folded copy CTAs reach the clamp (gpt-oss-120b
# M = 1024 / 2048: 264+ CTAs) and where they do not (Qwen3-30B-A3B MXFP4 M = 640: 160), each as
#   R = the patched build, the pass alone (MOEQ_FOLD_ORDER=0)
#   P = the patched build, folded at any slots (MOEQ_FOLD_ORDER=2)
#   F = main's build, folded at any slots (MOEQ_FOLD_ORDER=2): the full clamp
# in the order R P F F P R (one process each). Kernels are the same in both builds (host change only): one pack.
# Prediction: at gpt-oss M = 1024, P <= R - 3 us and F ~ R + 6 us (session 58's +5.8 us); at Qwen3 M = 640, P = F.
# If P beats R where it folds, raise cuda::kFoldOrderMaxSlots to the largest unchunked count (6143) and land the patch.
# Usage: s59_fold_one_wave.sh MAIN_BIN PATCHED_BIN   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
main_bin="$1" patched_bin="$2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv,noheader
step() {  # step LETTER PRESET SCHEME M...
  local letter="$1" preset="$2" scheme="$3" bin="$patched_bin" order=2
  shift 3
  [ "$letter" = R ] && order=0
  [ "$letter" = F ] && bin="$main_bin"
  # shellcheck disable=SC2068
  MOEQ_FOLD_ORDER=$order timeout 90 "$bin/moeq" bench --trials 5 --kernel layer --preset "$preset" --scheme "$scheme" \
    -M $@ >"$out/o.tmp" 2>&1
  grep -E '^layer  [a-z]' "$out/o.tmp" | grep -v '^layer  preset' | awk -v w="$letter" '{print w, $2, $3, $4, $5}' \
    >>"$out/steps.txt"
}
for letter in R P F F P R; do
  step "$letter" gpt-oss-120b mxfp4 1024 2048
  step "$letter" qwen3-30b-a3b mxfp4 640
  echo "round $letter $(($(date +%s) - t0)) s"
done
rm -f "$out/o.tmp"
echo "done $(($(date +%s) - t0)) s"
