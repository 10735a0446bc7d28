#!/usr/bin/env bash
# Session 39, call 11: where gpt-oss-120b's MXFP4 step at M = 2048 spends the ~100 us its kernels do not account for
# (call 7): an nsys timeline of the step's CUDA graph, node by node (start and end of each kernel), M = 1024 beside it.
# Usage: v122_nsys_step.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
command -v nsys || { ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null; echo "no nsys"; exit 0; }
nsys --version
for m in 2048 1024; do
  timeout 150 nsys profile --cuda-graph-trace=node -t cuda -o "$out/step$m" --force-overwrite true \
    "$build/moeq" bench --trials 3 --iterations 5 --kernel layer --preset gpt-oss-120b --scheme mxfp4 -M $m >"$out/nsys$m.log" 2>&1
  echo "nsys $m rc=$? $(($(date +%s) - t0)) s"
  timeout 100 nsys stats --report cuda_gpu_trace --format csv -o "$out/trace$m" "$out/step$m.nsys-rep" >/dev/null 2>&1
  echo "stats $m rc=$? $(($(date +%s) - t0)) s"
  ls "$out" | head
  rm -f "$out/step$m.nsys-rep" "$out/step$m.sqlite"
done
echo "done $(($(date +%s) - t0)) s"
