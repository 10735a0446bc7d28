#!/usr/bin/env python3
"""Where a kernel's instructions wait on scoreboards, from `nvdisasm -c -hex` output (sm_70 and later).

Each SASS instruction is 128 bits; its scheduling control sits in bits 105-127, i.e. bits 41-63 of the
second 64-bit word that `nvdisasm -hex` prints on the line after the instruction: stall cycles (4 bits),
yield (1), the scoreboard its result sets (write barrier, 3; 7 = none), the one its operand reads set
(read barrier, 3), and the mask of scoreboards it waits for (6). A wait on a scoreboard waits until every
instruction that set it has completed, so loads that share one cannot be waited for one at a time
(docs/perf-notes.md GEMM v16).

Usage:
  nvdisasm -c -hex KERNEL.cubin > k.sass
  sass_waits.py k.sass [--board N]          # every instruction with its control fields
  sass_waits.py k.sass --board 5 --sequence  # the K loop as W (waits on N), L (loads setting N), M (MMAs)

The sequence covers the lines from the first 128-bit global load to the last MMA; `|` marks a label. A
well-ordered ring reads W L+ M+ per group: its wait comes before the next loads are issued.
"""
import argparse
import re

INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;\s*/\* (0x[0-9a-f]+) \*/")
SECOND_WORD = re.compile(r"/\* (0x[0-9a-f]+) \*/")


def control_fields(second_word):
    bits = second_word >> 41
    return {
        "stall": bits & 0xF,
        "yield": (bits >> 4) & 1,
        "write_barrier": (bits >> 5) & 7,
        "read_barrier": (bits >> 8) & 7,
        "wait_mask": (bits >> 11) & 0x3F,
    }


def parse(path):
    """(offset, text, fields) per instruction, and the labels as (None, label, None)."""
    lines = open(path).read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = INSTRUCTION.match(lines[i])
        if m and i + 1 < len(lines) and SECOND_WORD.search(lines[i + 1]):
            out.append((m.group(1), m.group(2), control_fields(int(SECOND_WORD.search(lines[i + 1]).group(1), 16))))
            i += 2
            continue
        if lines[i].startswith(".L"):
            out.append((None, lines[i].rstrip(":"), None))
        i += 1
    return out


def board(value):
    return "-" if value == 7 else str(value)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", help="nvdisasm -c -hex output")
    ap.add_argument("--board", type=int, default=5, help="the scoreboard the loads set (default 5)")
    ap.add_argument("--sequence", action="store_true", help="print the K loop's W/L/M sequence only")
    args = ap.parse_args()
    code = parse(args.sass)
    if not args.sequence:
        for offset, text, f in code:
            if offset is None:
                print(text)
                continue
            waits = "".join(str(b) for b in range(6) if f["wait_mask"] >> b & 1)
            print(f"{offset} {text[:64]:<64} stall={f['stall']:2d} wb={board(f['write_barrier'])} "
                  f"rb={board(f['read_barrier'])} wait={waits}")
        return
    first = next((n for n, (o, t, _) in enumerate(code) if o and re.search(r"LDG\S*\.128", t)), None)
    last = max((n for n, (o, t, _) in enumerate(code) if o and "MMA" in t), default=None)
    if first is None or last is None:
        raise SystemExit("no 128-bit load or no MMA: not a GEMM K loop")
    seq = []
    for offset, text, f in code[first:last + 1]:
        if offset is None:
            seq.append("|")
            continue
        if f["wait_mask"] >> args.board & 1:
            seq.append("W")
        if re.search(r"\bLDG", text) and f["write_barrier"] == args.board:
            seq.append("L")
        if "MMA" in text:
            seq.append("M")
    print(re.sub(r"M{2,}", "M+", re.sub(r"L{2,}", "L+", "".join(seq))))


if __name__ == "__main__":
    main()
