#!/usr/bin/env python3
"""Merges `moeq tune` picks at M between a shipped table's samples into that table.

The shipped tables (tuning/sm_90/*.json) sample M at powers of two; each entry serves the rows
(min_m, max_m] (rows = M x top_k) down to the sample before. A tune at M between two samples
(tune.txt: one line per M, `kept` = tuned or planner) adds, where its pick beat the planner's tiles
(`tuned`), an entry for the rows from the nearest sample below (a power of two or another M of the
log) up to its own rows; the old entries lose those rows. Where the planner won, the table is left
as it is (a gap stays a gap, an entry stays: the log does not time the old entry's tiles).

Usage: merge_tuned_points.py TABLE TUNE_LOG PRESET SCHEME > MERGED
"""
import json
import re
import sys

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(-?[\d.]+)%\s+(tuned|planner)\s*$")


def tuned_points(log_path, preset, scheme):
    points, inside = [], False
    for line in open(log_path):
        if line.startswith("tune: ") and " on " in line:
            inside = line.split()[1:3] == [preset, scheme]
            continue
        m = ROW.match(line)
        if inside and m:
            points.append({"M": int(m[1]), "rows": int(m[2]), "block": int(m[3]), "gemm1": m[4], "gemm2": m[6],
                           "gain": float(m[10]), "kept": m[11]})
    return points


def main():
    table_path, log_path, preset, scheme = sys.argv[1:5]
    table = json.load(open(table_path))
    points = tuned_points(log_path, preset, scheme)
    if not points:
        sys.exit(f"no tune lines for {preset} {scheme} in {log_path}")
    top_k = points[0]["rows"] // points[0]["M"]
    samples = {top_k * (1 << i) for i in range(0, 20)} | {p["rows"] for p in points}
    entries = table["entries"]
    for p in sorted(points, key=lambda p: p["rows"]):
        if p["kept"] != "tuned":
            continue
        high = p["rows"]
        low = max([s for s in samples if s < high], default=0)
        kept = []
        for e in entries:
            if e["max_m"] <= low or e["min_m"] >= high:
                kept.append(e)
                continue
            if e["min_m"] < low:
                kept.append(dict(e, max_m=low))
            if e["max_m"] > high:
                kept.append(dict(e, min_m=high))
        kept.append({"block_m": p["block"], "gemm1_tile": p["gemm1"], "gemm2_tile": p["gemm2"], "min_m": low,
                     "max_m": high})
        entries = kept
        print(f"M = {p['M']}: rows ({low}, {high}] -> {p['gemm1']} / {p['gemm2']} ({p['gain']:+.1f}%)", file=sys.stderr)
    table["entries"] = sorted(entries, key=lambda e: e["min_m"])
    json.dump(table, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
