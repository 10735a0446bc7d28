#!/usr/bin/env python3
"""The SASS instructions with the most warp-stall samples in an ncu report's source page.

Usage: ncu --import R.ncu-rep --page source --csv --print-source sass | ncu_source_top.py [N]
Prints the N (default 30) instructions with the most samples: samples, address, instruction.
"""
import csv
import sys

rows = list(csv.reader(sys.stdin))
header_at = next(i for i, r in enumerate(rows) if any("Sampling" in c for c in r))
header = rows[header_at]
samples = next(i for i, c in enumerate(header) if c.startswith("Warp Stall Sampling (All"))
source = next(i for i, c in enumerate(header) if c == "Source")
address = next((i for i, c in enumerate(header) if c == "Address"), 0)
body = [r for r in rows[header_at + 1:] if len(r) > max(samples, source)]


def count(r):
    try:
        return float(r[samples].replace(",", ""))
    except ValueError:
        return 0.0


total = sum(count(r) for r in body)
print(f"{len(body)} instructions, {total:.0f} samples")
for r in sorted(body, key=count, reverse=True)[: int(sys.argv[1]) if len(sys.argv) > 1 else 30]:
    print(f"{count(r):8.0f} {100 * count(r) / max(total, 1):5.1f}%  {r[address]:>6}  {r[source].strip()[:90]}")
