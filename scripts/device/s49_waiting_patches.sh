#!/usr/bin/env bash
# Session 49's first call: the two patches of session 48 in one call (docs/experiments/README.md).
# v151 (self-routed GEMM1) with BUILD_NEW, then v150 (the planner's few-CTAs ring) as BUILD_NEW against BUILD_OLD with
# MOEQ_SELF_ROUTE=0, so that its O / N difference is the planner's alone. Each into its own folder under OUT.
# Usage: s49_waiting_patches.sh BUILD_NEW BUILD_OLD   (env OUT, MOEQ_CACHE_DIR)
set -u
here="$(dirname "$0")"
root_out="${OUT:-/tmp/moeq-out}"
OUT="$root_out/v151" bash "$here/v151_self_route.sh" "$1"
MOEQ_SELF_ROUTE=0 OUT="$root_out/v150" bash "$here/v150_few_ctas_ring_planner.sh" "$1" "$2"
rm -f "$root_out"/*/o.tmp
