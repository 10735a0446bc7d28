#!/usr/bin/env bash
# bin: 2ac32fa with docs/experiments/2026-12-07-e4m3-256-channel-whole-k.patch applied; bin-base: 2ac32fa. Ran in
# session 66 (H100; bench/results/2026-12-07-h100-s66-e4m3-whole-k.md).
# Session 66, third look: why the 256-channel whole-K e4m3 tile's MMAs cost ~560 us of the Qwen3 M = 4096 step (W:
# 1215 us, 655 with no wgmma issued) against ~123 us on main's 128-channel tile (E: 967 / 843), H100. ncu of the
# two GEMMs of one `moeq run` each: tensor-pipe activity, issue activity, warp states, shared-memory bank conflicts.
# Pack: .cache-device-s66d.txz (as scripts/device/s66_e4m3_whole_k.sh). Device command:
#   mkdir -p .cache-device && tar xJf .cache-device-s66d.txz -C .cache-device &&
#   OUT=$OUT bash scripts/device/s66c_e4m3_ncu.sh .cache-device/bin   (carry: [".cache-device-s66d.txz"])
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
tables="$(cd "$(dirname "$0")" && pwd)/tables"
base_build="$(dirname "$build")/bin-base"
metrics=gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio
for t in W E; do
  bin="$build/moeq" table="$tables/s66_e4m3_whole_k.json"
  [ "$t" = E ] && bin="$base_build/moeq" table="$tables/s64_any_st6.json"
  timeout 200 ncu --clock-control none --csv -k regex:moeq_moe_gemm --metrics "$metrics" \
    "$bin" run --preset qwen3-30b-a3b --scheme mxfp4:fp8-token --fp8-wgmma --tuning "$table" --codes canonical -M 4096 \
    >"$out/ncu_$t.csv" 2>&1
  echo "ncu $t rc=$? $(($(date +%s) - t0)) s"
  grep -E '"moeq_moe_gemm"' "$out/ncu_$t.csv" | awk -F'","' '{print $(NF-2), $(NF)}' | sed 's/"//g'
done
echo "done $(($(date +%s) - t0)) s"
