#!/usr/bin/env python3
"""Issue 6's side-by-side table from one device run's outputs (scripts/device/s59_side_by_side.sh, both parts, the
archives unpacked into one folder; s57_side_by_side.sh's files work too): per layer and M, moeq's GEMM1 / GEMM2 and
step against Humming's, the step against Humming's step less its torch align (timed alone in the same run).

Usage: side_by_side_table.py DIR   (reads DIR/moeq_*.txt and DIR/humming_*.txt; prints markdown)
"""
import glob
import os
import re
import sys


def rows(paths, kind):
    """(preset, scheme, M) -> time in us of the lines of `kind` (gemm1, gemm2, layer) in those files."""
    out = {}
    for path in paths:
        for line in open(path):
            f = line.split()
            if len(f) > 5 and f[0] == kind and re.fullmatch(r"[0-9]+", f[3]):
                try:
                    out[(f[1], f[2], int(f[3]))] = float(f[4])
                except ValueError:
                    pass  # an "unsupported" line
    return out


def humming_align(paths):
    """(preset, scheme, M) -> Humming's align alone, in us, from its layer lines."""
    out = {}
    for path in paths:
        for line in open(path):
            f = line.split()
            m = re.search(r"align ([0-9.]+)", line)
            if len(f) > 5 and f[0] == "layer" and m:
                out[(f[1], f[2], int(f[3]))] = float(m.group(1))
    return out


def ratio(a, b):
    return "%.3f" % (a / b) if a is not None and b else ""


def main():
    folder = sys.argv[1]
    moeq = glob.glob(os.path.join(folder, "moeq_*.txt"))
    humming = glob.glob(os.path.join(folder, "humming_*.txt"))
    mg = {k: rows(moeq, k) for k in ("gemm1", "gemm2")}
    hg = {k: rows(humming, k) for k in ("gemm1", "gemm2")}
    ml, hl, align = rows(moeq, "layer"), rows(humming, "layer"), humming_align(humming)
    print("| layer | M | GEMM1 moeq / Humming us | ratio | GEMM2 moeq / Humming us | ratio "
          "| step moeq / Humming less align us | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(set(ml) | set(mg["gemm1"]), key=lambda k: (k[0], k[1], k[2])):
        cells = []
        for k in ("gemm1", "gemm2"):
            a, b = mg[k].get(key), hg[k].get(key)
            cells += ["%s / %s" % ("%.1f" % a if a else "-", "%.1f" % b if b else "-"), ratio(a, b)]
        step, whole, al = ml.get(key), hl.get(key), align.get(key)
        less = whole - al if whole is not None and al is not None else None
        cells += ["%s / %s" % ("%.1f" % step if step else "-",
                                "%.1f (%.1f - %.1f)" % (less, whole, al) if less else "-"), ratio(step, less)]
        print("| %s %s | %d | %s |" % (key[0], key[1], key[2], " | ".join(cells)))


if __name__ == "__main__":
    main()
