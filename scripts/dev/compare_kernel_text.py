#!/usr/bin/env python3
"""Compares the machine code of the kernels of two dump folders, config by config.

A refactor of device code that should not change the generated code is proven here, offline: dump
the same kernels before and after (`MOEQ_DUMP_DIR=D moeq compile --arch sm_90a --preset tiny
--scheme S --tile T ...`), then `compare_kernel_text.py BEFORE AFTER [--ignore REGEX ...]`. Kernels are matched by
their generated source (the config; lines matching an --ignore pattern left out, e.g. a config field the
change adds with its old meaning), and compared by their ELF `.text*` sections only: the rest of a
cubin (symbols, the embedded source hash) changes with any edit.
"""
import glob
import hashlib
import os
import re
import struct
import sys


def text_sections(path):
    data = open(path, "rb").read()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    sections = {}
    for name, _type, _flags, _addr, offset, size in headers:
        label = data[names + name:data.index(b"\0", names + name)].decode()
        if label.startswith(".text"):
            sections[label] = hashlib.sha256(data[offset:offset + size]).hexdigest()
    return sections


def kernels(folder, ignore):
    found = {}
    for source in glob.glob(os.path.join(folder, "**", "moeq_*.cu"), recursive=True):
        cubin = source[:-3] + ".cubin"
        if os.path.exists(cubin):
            lines = [line for line in open(source).read().split("\n") if not any(re.search(p, line) for p in ignore)]
            found[hashlib.sha256("\n".join(lines).encode()).hexdigest()] = (source, text_sections(cubin))
    return found


def main():
    args = sys.argv[1:]
    ignore = [args[i + 1] for i in range(len(args) - 1) if args[i] == "--ignore"]
    before, after = kernels(args[0], ignore), kernels(args[1], ignore)
    common = sorted(set(before) & set(after))
    changed = [key for key in common if before[key][1] != after[key][1]]
    for key in changed:
        print("changed:", before[key][0], "->", after[key][0])
    print(f"{len(common)} kernels in both, {len(common) - len(changed)} with identical code, {len(changed)} changed")
    return 1 if changed or not common else 0


if __name__ == "__main__":
    sys.exit(main())
