#!/usr/bin/env python3
"""A shipped tuning table with one narrow entry per token count: the rows of M alone ((rows - 8, rows], rows = M x top_k)
take BLOCK, GEMM1 and GEMM2; every other row keeps the shipped entry or the planner's rules.
Usage: step_sweep_table.py SHIPPED TOP_K GEMM1 GEMM2 M... > TABLE   (the block is GEMM1's row count)"""
import json
import sys


def split(entries, lo, hi, new):
    out = []
    for e in entries:
        if e["max_m"] <= lo or e["min_m"] >= hi:
            out.append(e)
            continue
        if e["min_m"] < lo:
            out.append(dict(e, max_m=lo))
        if e["max_m"] > hi:
            out.append(dict(e, min_m=hi))
    out.append(new)
    return sorted(out, key=lambda e: e["min_m"])


def main():
    shipped, top_k, gemm1, gemm2 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    table = json.load(open(shipped))
    block = int(gemm1.split("x")[0])
    entries = table["entries"]
    for m in map(int, sys.argv[5:]):
        rows = m * top_k
        entries = split(entries, rows - 8, rows,
                        {"block_m": block, "gemm1_tile": gemm1, "gemm2_tile": gemm2, "min_m": rows - 8, "max_m": rows})
    table["entries"] = entries
    json.dump(table, sys.stdout, indent=2, sort_keys=True)
    print()


main()
