#!/usr/bin/env python3
"""cuBLAS bf16 ceiling for the MoE GEMM shapes of `moeq bench`, timed on the same GPU.

The MoE GEMM of M tokens with top_k experts does the work of one dense [M*top_k, K] x [K, N]
matmul (the FLOPs `moeq bench` reports); this times that dense matmul with torch.matmul (cuBLAS)
in bf16 under a CUDA graph, operands rotated past L2, and prints TFLOP/s per case.
Usage: cublas_bf16.py [--preset qwen3-30b-a3b ...] [--tokens 1 16 ...]
"""
import argparse
import json
import pathlib

import torch
from graph_timing import capture, median_replay_us

SHAPES = pathlib.Path(__file__).resolve().parents[1] / "shapes"


def gemm_shapes(preset):
    d = json.loads((SHAPES / f"{preset}.json").read_text())
    k, i, top_k = d["hidden_size"], d["intermediate_size"], d["top_k"]
    gated = d.get("activation", "silu") not in ("silu-no-mul", "gelu-no-mul", "gelu-tanh-no-mul", "relu2-no-mul")
    return top_k, {"gemm1": ((2 * i) if gated else i, k), "gemm2": (k, i)}


def time_us(fn, iters=20, trials=5):
    fn()
    torch.cuda.synchronize()
    return median_replay_us(capture(lambda i: fn(), iters), iters, trials)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", nargs="+", default=["qwen3-30b-a3b"])
    ap.add_argument("--tokens", nargs="+", type=int, default=[1, 16, 64, 256, 1024, 4096])
    a = ap.parse_args()
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'gemm':6} {'preset':14} {'M':>6} {'rows':>7} {'N':>6} {'K':>6} {'time us':>10} {'TFLOP/s':>9}")
    l2 = 60 << 20
    for preset in a.preset:
        top_k, shapes = gemm_shapes(preset)
        for name, (n, k) in shapes.items():
            for m in a.tokens:
                rows = m * top_k
                copies = max(1, min(16, (3 * l2) // max(1, 2 * (rows * k + n * k))))
                xs = [torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
                ws = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
                outs = [torch.empty(rows, n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]

                def run():
                    for c in range(copies):
                        torch.matmul(xs[c], ws[c], out=outs[c])

                us = time_us(run) / copies
                tflops = 2.0 * rows * n * k / (us * 1e-6) / 1e12
                print(f"{name:6} {preset:14} {m:6d} {rows:7d} {n:6d} {k:6d} {us:10.2f} {tflops:9.1f}")


if __name__ == "__main__":
    main()
