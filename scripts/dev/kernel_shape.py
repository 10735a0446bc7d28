#!/usr/bin/env python3
"""The shape of each kernel's machine code in two dump folders, config by config: spills, instructions, the main
loop's length and its uniform-register moves.

A change to a warp-specialized kernel can reshape code it does not touch (session 38: a second copy of the
consumers' ring made ptxas spill 248 bytes in a kernel the change never ran; a branch around the ring moved the
wgmma descriptors out of uniform registers). Dump the same kernels with the build before and after the change,
verbose, then compare here before spending device time:

  MOEQ_PTXAS_VERBOSE=1 MOEQ_DUMP_DIR=BEFORE MOEQ_CACHE_DIR=$(mktemp -d) OLD/moeq compile --arch sm_90a --preset P ...
  MOEQ_PTXAS_VERBOSE=1 MOEQ_DUMP_DIR=AFTER  MOEQ_CACHE_DIR=$(mktemp -d) NEW/moeq compile --arch sm_90a --preset P ...
  kernel_shape.py BEFORE AFTER [--ignore REGEX ...] [--nvdisasm PATH]

Configs are matched as compare_kernel_text.py matches them. Per kernel: spill stores (bytes, from the ptxas log),
SASS instructions, the span from the first to the last HGMMA (the main loop of a wgmma kernel), and R2UR count.
A line is flagged (!) where the spills grew or the HGMMA span grew by more than 2%. nvdisasm comes from the
`nvidia-cuda-nvdisasm` wheel where the toolkit has none.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_kernel_text import kernels  # noqa: E402

SPILLS = re.compile(r"(\d+) bytes spill stores")


def spill_bytes(source):
    log = source[:-3] + ".log"
    if not os.path.exists(log):
        return None
    found = SPILLS.findall(open(log, errors="replace").read())
    return max(int(n) for n in found) if found else None


def sass_shape(nvdisasm, cubin):
    text = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    lines = [line.split("*/", 1)[1].split(";")[0].strip() for line in text.split("\n") if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)]
    mma = [i for i, line in enumerate(lines) if "HGMMA" in line]
    span = mma[-1] - mma[0] + 1 if mma else 0
    return len(lines), span, sum("R2UR" in line for line in lines)


def main():
    args = sys.argv[1:]
    ignore = [args[i + 1] for i in range(len(args) - 1) if args[i] == "--ignore"]
    nvdisasm = next((args[i + 1] for i in range(len(args) - 1) if args[i] == "--nvdisasm"), shutil.which("nvdisasm"))
    if not nvdisasm:
        sys.exit("kernel_shape.py: no nvdisasm on PATH; give --nvdisasm PATH")
    before, after = kernels(args[0], ignore), kernels(args[1], ignore)
    common = sorted(set(before) & set(after), key=lambda key: before[key][0])
    flagged = 0
    print("spills before/after, instructions, HGMMA span, R2UR; kernel (before's dump)")
    for key in common:
        (old_source, _), (new_source, _) = before[key], after[key]
        old_spill, new_spill = spill_bytes(old_source), spill_bytes(new_source)
        old_shape = sass_shape(nvdisasm, old_source[:-3] + ".cubin")
        new_shape = sass_shape(nvdisasm, new_source[:-3] + ".cubin")
        worse = (old_spill is not None and new_spill is not None and new_spill > old_spill) or new_shape[1] > 1.02 * old_shape[1]
        flagged += worse
        print(f"{'!' if worse else ' '} spills {old_spill}/{new_spill}  insts {old_shape[0]}/{new_shape[0]}  "
              f"span {old_shape[1]}/{new_shape[1]}  R2UR {old_shape[2]}/{new_shape[2]}  {os.path.basename(old_source)}")
    print(f"{len(common)} kernels in both, {flagged} flagged")
    return 1 if flagged or not common else 0


if __name__ == "__main__":
    sys.exit(main())
