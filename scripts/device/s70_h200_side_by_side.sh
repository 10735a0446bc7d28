#!/usr/bin/env bash
# Issue 6 on session 70's code, one H200 call: every layer of s59_side_by_side.sh compiled on all cores (no kernel pack
# carried), its `moeq` part, its `humming` part, and the side-by-side table printed (the archives unpacked in $OUT/t).
# Session 59 (the last H200 side by side) ran 150 s + 198 s with a pack; the compiles add ~20 s a layer on 16 cores.
# Device command (carry: ["build_dev/head", ".cache-device/wheels"]: scripts/device/humming_fetch.sh fills it here):
#   OUT=$OUT bash scripts/device/s70_h200_side_by_side.sh build_dev/head
# Usage: s70_h200_side_by_side.sh BUILD   (env OUT, MOEQ_CACHE_DIR)
. "$(dirname "$0")/evidence_lib.sh"
device_setup "$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
compile_layers_bg "$build/moeq" 4 gpt-oss-120b mxfp4
compile_layers_bg "$build/moeq" 4 qwen3-30b-a3b mxfp4 int4-g128
compile_layers_bg "$build/moeq" 4 deepseek-v3 fp8-block
wait
compiled_summary
for part in moeq humming; do
  OUT="$out" bash "$root/scripts/device/s59_side_by_side.sh" "$part" "$build"
done
mkdir -p "$out/t"
for part in moeq humming; do tar xzf "$out/side_by_side_$part.tgz" -C "$out/t"; done
python3 "$root/scripts/device/side_by_side_table.py" "$out/t"
grep -hE "copy|GB/s" "$out/t"/moeq_gemm_qwen3-30b-a3b_int4-g128.txt | head -2
cat "$out/t/cublas.txt" | tail -8
rm -rf "$out/t" "$out"/compile_*.txt
echo "done $(($(date +%s) - t0)) s"
