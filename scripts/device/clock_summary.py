#!/usr/bin/env python3
"""The SM clock per phase of a device call, from nvidia-smi samples (clocks_start in evidence_lib.sh).

Usage: clock_summary.py SMI_CSV PHASES
  SMI_CSV: lines `timestamp, clocks.sm, power.draw, clocks_event_reasons.active` (nvidia-smi --format=csv,noheader).
  PHASES: lines `YYYY/MM/DD HH:MM:SS.ns NAME` (clocks_mark); a phase runs until the next line.
Prints per phase: samples, SM clock min / median / max (MHz), the share of samples under 1900 MHz, the clock event
reasons seen (0x4: SW power cap) and the largest sampled power (W; nvidia-smi's is a lagging average).
"""
import csv
import datetime
import statistics
import sys


def stamp(text):
    date, time = text.strip().split()[:2]
    return datetime.datetime.strptime(f"{date} {time[:15]}", "%Y/%m/%d %H:%M:%S.%f")


def main(smi_path, phases_path):
    samples = []
    for row in csv.reader(open(smi_path)):
        try:
            samples.append((stamp(row[0]), int(row[1].split()[0]), float(row[2].split()[0]), row[3].strip()))
        except (ValueError, IndexError):
            continue  # nvidia-smi's notices, [N/A] fields
    phases = []
    for line in open(phases_path):
        parts = line.split(maxsplit=2)
        if len(parts) == 3:
            phases.append((stamp(" ".join(parts[:2])), parts[2].strip()))
    phases.append((datetime.datetime.max, "end"))
    print(f"{'phase':32s} {'n':>5s} {'min':>5s} {'median':>6s} {'max':>5s} {'<1900':>6s} {'W max':>6s}  reasons")
    for (begin, name), (end, _) in zip(phases, phases[1:]):
        inside = [s for s in samples if begin <= s[0] < end]
        if not inside:
            print(f"{name:32s} {0:5d}")
            continue
        clocks = [s[1] for s in inside]
        low = sum(c < 1900 for c in clocks) / len(clocks)
        reasons = ",".join(sorted({s[3] for s in inside}))
        print(f"{name:32s} {len(inside):5d} {min(clocks):5d} {statistics.median(clocks):6.0f} {max(clocks):5d} "
              f"{100 * low:5.1f}% {max(s[2] for s in inside):6.1f}  {reasons}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
