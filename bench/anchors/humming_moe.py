#!/usr/bin/env python3
"""Humming's MoE GEMMs (indexed layout, bf16 activations) on the shapes of `moeq bench`.

Times Humming's GEMM1 ([M, K] hidden -> [M*top_k, N13]) and GEMM2 ([M*top_k, I] -> [M*top_k, K])
separately, for the same presets, schemes and token counts as `moeq bench --kernel gemm1 gemm2`,
so the two can be read side by side. Written against humming-kernels 0.1.20 (PyPI wheel, the
vllm-project/humming code); other versions may have moved the functions used here.

Install on the GPU machine (it has no network). Here, with network, scripts/device/humming_fetch.sh
puts the wheels into .cache-device/wheels/ (untracked, it travels with the working tree); there,
scripts/device/humming_anchor.sh installs them and runs this script. By hand, on the GPU machine:

    export CXX=/usr/bin/g++
    python3 -m pip install --no-index --find-links .cache-device/wheels --no-deps \
        --target /tmp/humming-site humming-kernels==0.1.20
    PYTHONPATH=/tmp/humming-site python3 bench/anchors/humming_moe.py --preset qwen3-30b-a3b

(`--user` does not work there: python3 is a virtual environment.) Humming also imports jinja2,
markupsafe, filelock, packaging, numpy, triton and cuda-bindings (cuda.bindings.driver/nvrtc);
the GPU image has them all. If one is missing, install its wheel from the same folder the same way
(humming_anchor.sh does that for each import that fails).
Environment note: PyTorch extensions must be built with CXX=/usr/bin/g++ on that machine: the
default g++ (under /opt/gcc) produced an extension that crashed. With torch >= 2.11 Humming loads
its precompiled launcher (humming/_native/x86_64/libhumming_launcher.so) and compiles GEMM kernels
with NVRTC, so no C++ build should happen; CXX matters when Humming falls back to building its
launcher with torch.utils.cpp_extension (HUMMING_USE_TORCH_STABLE_API=0, or an older torch).

Method (as `moeq bench`, bench/README.md):
- routing: M tokens to top_k distinct experts, uniform random; moe align (sorted slot ids padded
  per expert to Humming's block_m, one expert id per block, padded count) by a small torch
  implementation of the same tensors that vLLM's moe_align_block_size / Humming's test helper give;
- weights: random codes and plausible scales in the checkpoint layout moeq calls canonical,
  converted by Humming's own converters (schema classes) and transformed by
  humming.transform.transform_humming_tensors into the kernel layout; enough copies of the same
  bytes at distinct addresses that a pass reads more than 3x the L2 (clamped to 1..16 copies);
- timing: a CUDA graph of ITERS launches (rounded up to whole rotations of the copies), the median
  of TRIALS replays; each GEMM separately, with Humming's own heuristic tile for valid_shape_m =
  M*top_k (humming.tune.get_heuristics_config, gemm_type "indexed");
- bytes: as moeq counts them: codes + scales of the distinct experts touched in moeq's canonical
  formats (int4: bf16 scale per 128; mxfp4: ue8m0 per 32; fp8-block: fp32 per 128x128 block),
  A read once, C written once; Humming's own padding and scale expansion are not counted;
  FLOPs 2 * M * top_k * N * K.
- check: before timing, each GEMM runs once at --check-tokens against a float32 torch reference
  of the dequantized weights (relative Frobenius error printed), so a wrong layout shows.

Differences from moeq worth knowing when reading the numbers: fp8-block weights go through
Humming's fp8 checkpoint converter, which turns the fp32 128x128 block scales into bf16 scales per
(row, 128 K) (GROUP, as vLLM loads DeepSeek-V3 into Humming; `--fp8-scales block` keeps Humming's
fp32 BLOCK scales instead); N and K are padded to multiples of 256 and 128 as vLLM does (only
gpt-oss's 2880 is affected); programmatic dependent launch is as Humming's heuristic leaves it (its
sm_90 MoE tiles leave it off; `--pdl on|off` forces it, shown as `pdl` in the tile column); each GEMM gets the moe align of its own tile's block_m, where vLLM
builds one align with GEMM1's block_m and uses it for both.

Layer mode (`--layer`, bench/anchors/humming_layer.py): instead of each GEMM, the whole experts
step as an engine (vLLM) runs it with Humming, per preset, scheme and M, in one CUDA graph with the
same weight rotation and median: moe align of the routing (torch ops; Humming ships no align
kernel), GEMM1, the gated activation (Humming's process_input kernel; SiLU-and-mul, or gpt-oss's
SwiGLU-OAI on interleaved gate/up columns, clamp 7.0, alpha 1.702; `--layer-act torch` for torch
ops), GEMM2, the router's top-k weights and the sum over top_k into [M, K] bf16 (torch bmm;
Humming 0.1.20 has no fused top-k weight or reduction), checked first against a float32 torch
reference of the whole step. One line per case with gemm "layer": time per step, MB moved
(weights of the experts touched for both GEMMs + hidden in + out), GB/s, TFLOP/s of both GEMMs,
the tiles. Its docstring says which steps are torch ops and what vLLM runs there instead.

Usage: humming_moe.py [--preset P ...] [--scheme S ...] [--tokens M ...] [--trials T] [--iters I]
                      [--layer [--layer-act humming|torch]]
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import time
import traceback

SHAPES = pathlib.Path(__file__).resolve().parents[1] / "shapes"
PRESETS = ["qwen3-30b-a3b", "gpt-oss-120b", "deepseek-v3"]
SCHEMES = ["int4-g128", "mxfp4", "fp8-block"]
NON_GATED = ("silu-no-mul", "gelu-no-mul", "gelu-tanh-no-mul", "relu2-no-mul")
COMPUTE = {"gemm_type": "indexed"}
MAX_COPIES = 16
LOCK_WORDS = 8192  # int32 stream-K locks per buffer (Humming's layer allocates 2048)


# ----------------------------------------------------------------------------------------------
# Shapes and byte counts (no torch needed)

def load_preset(name):
    d = json.loads((SHAPES / f"{name}.json").read_text())
    k, i = d["hidden_size"], d["intermediate_size"]
    gated = d.get("activation", "silu") not in NON_GATED
    return {
        "name": name,
        "E": d["num_experts"],
        "top_k": d["top_k"],
        "bias": bool(d.get("bias", False)),
        "gemms": {"gemm1": ((2 * i) if gated else i, k), "gemm2": (k, i)},
        # used by the layer mode only (humming_layer.py)
        "activation": d.get("activation", "silu"),
        "interleaved": bool(d.get("interleaved_gate_up", False)),
        "alpha": d.get("swiglu_alpha", 1.702),
        "limit": d.get("swiglu_limit", 7.0),
    }


def unsupported_reason(scheme, n, k, fp8_scales):
    if scheme in ("int4-g128", "fp8-block") and k % 128:
        return f"K={k} is not a multiple of 128"
    if scheme == "fp8-block" and fp8_scales == "block" and n % 128:
        return f"N={n} is not a multiple of 128 (fp8 BLOCK scales)"
    if scheme == "mxfp4" and k % 32:
        return f"K={k} is not a multiple of 32"
    return None


def expert_weight_bytes(scheme, n, k):
    """Codes + scales of one expert in moeq's canonical layout (CONTRACT section 4)."""
    if scheme == "int4-g128":
        return n * k // 2 + n * (k // 128) * 2
    if scheme == "mxfp4":
        return n * k // 2 + n * (k // 32)
    if scheme == "fp8-block":
        return n * k + math.ceil(n / 128) * math.ceil(k / 128) * 4
    raise ValueError(scheme)


# ----------------------------------------------------------------------------------------------
# Everything below needs torch and humming

def import_humming():
    global torch, H, capture, median_replay_us
    if "H" in globals():
        return
    import torch  # noqa: F811
    from graph_timing import capture, median_replay_us  # noqa: F811 (imports torch)

    import humming
    from humming.forward import humming_forward
    from humming.kernel.humming import HummingKernel
    from humming.schema import HummingWeightSchema
    from humming.transform import prepare_fp16_e8m0_scale, prepare_layer_config, transform_humming_tensors
    from humming.tune import get_heuristics_config

    try:  # the checkpoint converters of two schemes; without one, that scheme prints "unsupported"
        from humming.schema.fp8 import Fp8WeightSchema
    except ImportError:
        Fp8WeightSchema = None
    try:
        from humming.schema.mxfp4 import Mxfp4WeightSchema
    except ImportError:
        Mxfp4WeightSchema = None

    H = argparse.Namespace(
        version=getattr(humming, "__version__", "?"),
        humming_forward=humming_forward,
        HummingKernel=HummingKernel,
        HummingWeightSchema=HummingWeightSchema,
        Fp8WeightSchema=Fp8WeightSchema,
        Mxfp4WeightSchema=Mxfp4WeightSchema,
        prepare_fp16_e8m0_scale=prepare_fp16_e8m0_scale,
        prepare_layer_config=prepare_layer_config,
        transform_humming_tensors=transform_humming_tensors,
        get_heuristics_config=get_heuristics_config,
    )


def random_canonical(scheme, E, n, k, has_bias, gen, dev):
    """Random codes and plausible scales in moeq's canonical layout, on the GPU."""
    def rand(*shape):
        return torch.rand(*shape, generator=gen, device=dev)

    def random_bytes(*shape):
        return torch.randint(0, 256, shape, generator=gen, device=dev, dtype=torch.uint8)

    c = {}
    if scheme == "int4-g128":
        # codes: [E, n, k/2] bytes, element 2j in the low nibble of byte j, value = code - 8 (uint4b8)
        c["codes"] = random_bytes(E, n, k // 2)
        c["scales"] = ((rand(E, n, k // 128) + 0.5) / (4.6 * math.sqrt(k))).to(torch.bfloat16)
    elif scheme == "mxfp4":
        # codes: e2m1, same nibble order; scales: ue8m0 per 32 K elements
        c["codes"] = random_bytes(E, n, k // 2)
        center = 127 - round(math.log2(3.0 * math.sqrt(k)))
        c["scales"] = torch.randint(center - 2, center + 2, (E, n, k // 32), generator=gen, device=dev,
                                    dtype=torch.uint8)
    elif scheme == "fp8-block":
        # codes: e4m3 bytes with the top exponent bit cleared (|w| <= 1.875, never NaN);
        # scales: fp32 multipliers per 128x128 block (DeepSeek's weight_scale_inv)
        c["codes"] = random_bytes(E, n, k).bitwise_and_(0xBF)
        c["scales"] = (rand(E, math.ceil(n / 128), math.ceil(k / 128)) + 0.5) / (0.6 * math.sqrt(k))
    else:
        raise ValueError(scheme)
    if has_bias:
        c["bias"] = (torch.randn(E, n, generator=gen, device=dev) * 0.1).to(torch.bfloat16)
    return c


def to_humming_standard(scheme, canon, E, n, k, dev, fp8_scales):
    """Canonical tensors -> (HummingWeightSchema, humming-standard tensors) via Humming's converters."""
    bf16 = torch.bfloat16
    if scheme == "int4-g128":
        # Humming's standard form already is moeq's canonical int4: int32 [E, n, k/8], unsigned codes
        # with the implicit zero point 8, bf16 scales [E, n, k/128].
        schema = H.HummingWeightSchema(b_dtype="uint4", weight_scale_group_size=128)
        tensors = {"weight": canon["codes"].view(torch.int32), "weight_scale": canon["scales"]}
        # What HummingLayer.transform / BaseWeightSchema.convert_humming do for float activations:
        # codes that avoid 0 become sign-magnitude e0m3; random codes include 0 and stay uint4.
        with torch.cuda.device(dev):
            schema, tensors = schema.convert_symmetric_integer_weight(tensors)
    elif scheme == "mxfp4":
        if H.Mxfp4WeightSchema is None:
            raise NotImplementedError("this Humming has no humming.schema.mxfp4.Mxfp4WeightSchema")
        source = {"weight": canon["codes"], "weight_scale": canon["scales"]}
        schema, tensors = H.Mxfp4WeightSchema().convert_humming(
            source, shape_n_stacks=[n], shape_k_stacks=[k], param_dtype=bf16, num_experts=E, device=dev)
    elif scheme == "fp8-block" and fp8_scales == "group":
        if H.Fp8WeightSchema is None:
            raise NotImplementedError("this Humming has no humming.schema.fp8.Fp8WeightSchema")
        source = {"weight": canon["codes"].view(torch.float8_e4m3fn), "weight_scale_inv": canon["scales"]}
        schema, tensors = H.Fp8WeightSchema(weight_block_size=[128, 128]).convert_humming(
            source, shape_n_stacks=[n], shape_k_stacks=[k], param_dtype=bf16, num_experts=E, device=dev)
    elif scheme == "fp8-block":
        schema = H.HummingWeightSchema(b_dtype="float8e4m3", bs_dtype="float32", weight_scale_group_size=128,
                                       weight_scale_group_size_n=128)
        tensors = {"weight": canon["codes"].view(torch.int32), "weight_scale": canon["scales"].contiguous()}
    else:
        raise ValueError(scheme)
    tensors = dict(tensors)
    if "bias" in canon:
        tensors["bias"] = canon["bias"]
    return schema, tensors


class Gemm:
    """One GEMM's weights (all experts) in Humming's kernel layout, plus rotation copies."""

    def __init__(self, scheme, E, n, k, has_bias, dev, args):
        self.scheme, self.E, self.n, self.k, self.dev = scheme, E, n, k, dev
        gen = torch.Generator(device=dev)
        gen.manual_seed(1234 + n * 7 + k)
        self.canon = random_canonical(scheme, E, n, k, has_bias, gen, dev)
        self.schema, self.standard = to_humming_standard(scheme, self.canon, E, n, k, dev, args.fp8_scales)
        config = H.prepare_layer_config(
            shape_n=n, shape_k=k, weight_schema=self.schema, input_schema=None, num_experts=E,
            pad_n_to_multiple=args.pad_n, pad_k_to_multiple=args.pad_k, has_bias=has_bias,
            torch_dtype=torch.bfloat16, device=dev, tensors=dict(self.standard))
        config, tensors = H.prepare_fp16_e8m0_scale(config, dict(self.standard))
        self.config = config
        self.copies = [H.transform_humming_tensors(config, tensors)]
        torch.cuda.synchronize()

    def drop_reference(self):
        self.canon = None
        self.standard = None

    def ensure_copies(self, count):
        while len(self.copies) < count:
            try:
                self.copies.append({key: t.clone() for key, t in self.copies[0].items()})
            except torch.cuda.OutOfMemoryError:
                break
        return min(count, len(self.copies))

    def tuning(self, rows, pdl):
        cfg = dict(H.get_heuristics_config(self.config, shape_m=rows, gemm_type="indexed", device=self.dev))
        if pdl != "auto":
            cfg["use_pdl"] = pdl == "on"
        return cfg

    def kernel_specs(self, cfgs):
        """(HummingKernel, kwargs) of each distinct tile, as HummingKernel.prepare_kernels builds them."""
        unique = {json.dumps(c, sort_keys=True): c for c in cfgs}
        entries = [[0, 1 << 30, c] for c in unique.values()]
        layer_obj, compute_obj, tuning_list = H.HummingKernel._resolve_configs(
            self.config.to_str(), json.dumps(COMPUTE), entries, self.dev)
        specs = []
        for _, _, tuning in tuning_list:
            kwargs = layer_obj | compute_obj | tuning
            kwargs.pop("num_sms", None)
            specs.append((H.HummingKernel, kwargs))
        return specs

    def launch(self, copy, a, c, align, top_k, rows, cfg, locks):
        w = self.copies[copy]
        sorted_ids, expert_ids, num_tokens_padded = align
        H.humming_forward(
            self.config, inputs=a, weight=w["weight"], weight_scale=w.get("weight_scale"),
            zero_point=w.get("zero_point"), bias=w.get("bias"), weight_scale_2=w.get("weight_scale_2"),
            outputs=c, sorted_ids=sorted_ids, expert_ids=expert_ids, num_tokens_padded=num_tokens_padded,
            locks=locks, top_k=top_k, valid_shape_m=rows, compute_config=COMPUTE, tuning_config=cfg)

    def dequant_expert(self, e):
        """float32 [n, k] of expert e from the canonical tensors (independent of Humming)."""
        c, n, k = self.canon, self.n, self.k
        if self.scheme in ("int4-g128", "mxfp4"):
            b = c["codes"][e]
            codes = torch.stack((b & 0xF, b >> 4), dim=-1).reshape(n, k)
            if self.scheme == "int4-g128":
                return (codes.float() - 8.0) * c["scales"][e].float().repeat_interleave(128, dim=1)
            table = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], device=b.device)
            scale = torch.exp2(c["scales"][e].float() - 127.0).repeat_interleave(32, dim=1)
            return table[codes.long()] * scale
        w = c["codes"][e].view(torch.float8_e4m3fn).float()
        s = c["scales"][e].repeat_interleave(128, dim=0)[:n].repeat_interleave(128, dim=1)[:, :k]
        return w * s

    def humming_dequant(self, experts):
        """Humming's own decode of the humming-standard tensors (HummingWeightSchema.dequant_tensors)."""
        idx = torch.as_tensor(experts, device=self.dev)
        sub = {key: t.index_select(0, idx) for key, t in self.standard.items() if key != "bias"}
        return self.schema.dequant_tensors(sub)


def cuda_device():
    return torch.device("cuda", torch.cuda.current_device())


def random_routing(M, E, top_k, seed, dev):
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    return torch.rand(M, E, generator=gen, device=dev).topk(top_k, dim=1).indices


def moe_align(topk_ids, E, block_m):
    """sorted_ids / expert_ids / num_tokens_padded of the indexed layout (int32).

    Flat slot f = token * top_k + k. Per expert, in expert order, its slots in increasing f, padded
    up to a multiple of block_m with the value M*top_k (which the kernel neither reads nor writes);
    expert_ids holds the expert of each block; num_tokens_padded the padded total. The same tensors
    as Humming's test helper (humming.testing.data.generate_moe_tensors) and, up to the order of slots
    within an expert and spare capacity, vLLM's moe_align_block_size."""
    dev = topk_ids.device
    flat = topk_ids.reshape(-1).long()
    numel = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + block_m - 1) // block_m * block_m
    pad_start = torch.cumsum(padded, 0) - padded
    count_start = torch.cumsum(counts, 0) - counts
    order = torch.sort(flat, stable=True).indices
    expert_sorted = flat[order]
    rank = torch.arange(numel, device=dev) - count_start[expert_sorted]
    total = int(padded.sum().item())
    sorted_ids = torch.full((total,), numel, dtype=torch.int32, device=dev)
    sorted_ids[pad_start[expert_sorted] + rank] = order.to(torch.int32)
    expert_ids = torch.repeat_interleave(torch.arange(E, device=dev, dtype=torch.int32), padded // block_m)
    num_tokens_padded = torch.tensor([total], dtype=torch.int32, device=dev)
    return sorted_ids, expert_ids, num_tokens_padded


def time_graph(launch, n_launch, trials):
    for i in range(min(3, n_launch)):  # warm-up: kernel load and first touch stay out
        launch(i)
    torch.cuda.synchronize()
    graph = capture(launch, n_launch)
    graph.replay()
    torch.cuda.synchronize()
    us = median_replay_us(graph, n_launch, trials)
    del graph
    return us


def describe(cfg, gemm):
    bs, ws = cfg.get("block_shape", ("?",) * 3), cfg.get("warp_shape", ("?",) * 3)
    flags = [f"{cfg.get('mma_type', '?')}", "x".join(map(str, bs)) + "/" + "x".join(map(str, ws)),
             f"st{cfg.get('num_stages', '?')}", f"cta/sm{cfg.get('num_ctas_per_sm', 1)}",
             f"sms{cfg.get('num_sms', 0) or 'all'}"]
    for key, tag in (("use_stream_k", "streamk"), ("use_warp_spec", "ws"), ("use_tma", "tma"), ("use_pdl", "pdl")):
        if cfg.get(key):
            flags.append(tag)
    flags.append(f"b={gemm.config.b_dtype}")
    return " ".join(flags)


def case_inputs(gemm, name, M, top_k, seed):
    rows = M * top_k
    a_rows = M if name == "gemm1" else rows
    gen = torch.Generator(device=gemm.dev)
    gen.manual_seed(seed)
    a = torch.randn(a_rows, gemm.k, generator=gen, device=gemm.dev).to(torch.bfloat16)
    c = torch.empty(rows, gemm.n, device=gemm.dev, dtype=torch.bfloat16)
    return a, c


def run_check(gemm, name, preset, scheme, M, cfg, args):
    top_k_route = preset["top_k"]
    top_k = top_k_route if name == "gemm1" else 1
    rows = M * top_k_route
    topk_ids = random_routing(M, preset["E"], top_k_route, 7 + M, gemm.dev)
    align = moe_align(topk_ids, preset["E"], cfg["block_shape"][0])
    a, c = case_inputs(gemm, name, M, top_k_route, 11 + M)
    c.fill_(float("nan"))
    locks = torch.zeros(LOCK_WORDS, dtype=torch.int32, device=gemm.dev)
    gemm.launch(0, a, c, align, top_k, rows, cfg, locks)
    torch.cuda.synchronize()
    flat = topk_ids.reshape(-1)
    ref = torch.zeros(rows, gemm.n, device=gemm.dev)
    experts = flat.unique().tolist()
    for e in experts:
        slots = (flat == e).nonzero().squeeze(1)
        src = slots // top_k_route if name == "gemm1" else slots
        w = gemm.dequant_expert(e)
        out = a[src].float() @ w.T
        if "bias" in gemm.canon:
            out += gemm.canon["bias"][e].float()
        ref[slots] = out
    rel = ((c.float() - ref).norm() / ref.norm()).item()
    decode = "n/a"
    try:
        few = experts[:4]
        mine = torch.stack([gemm.dequant_expert(e) for e in few])
        theirs = gemm.humming_dequant(few).float()
        decode = f"{((mine - theirs).abs().max() / mine.abs().max()).item():.1e}"
    except Exception as err:  # the cross-check is informative only
        decode = f"n/a ({type(err).__name__})"
    verdict = "ok" if math.isfinite(rel) and rel < args.check_tol else "MISMATCH"
    print(f"check  {name:6} {preset['name']:14} {scheme:10} M={M:<5d} rel_err={rel:.2e} "
          f"decode_vs_humming={decode} {verdict}  [{describe(cfg, gemm)}]", flush=True)


def time_case(gemm, name, preset, scheme, M, cfg, l2_bytes, args):
    E, top_k_route = preset["E"], preset["top_k"]
    top_k = top_k_route if name == "gemm1" else 1
    rows = M * top_k_route
    topk_ids = random_routing(M, E, top_k_route, 99 + M, gemm.dev)
    touched = int(topk_ids.unique().numel())
    a_rows = M if name == "gemm1" else rows
    nbytes = expert_weight_bytes(scheme, gemm.n, gemm.k) * touched + a_rows * gemm.k * 2 + rows * gemm.n * 2
    flops = 2.0 * rows * gemm.n * gemm.k
    want = max(1, min(MAX_COPIES, math.ceil(3.0 * l2_bytes / nbytes)))
    copies = gemm.ensure_copies(want)
    align = moe_align(topk_ids, E, cfg["block_shape"][0])
    a, c = case_inputs(gemm, name, M, top_k_route, 5 + M)
    n_launch = math.ceil(max(args.iters, copies) / copies) * copies
    locks = [torch.zeros(LOCK_WORDS, dtype=torch.int32, device=gemm.dev) for _ in range(min(n_launch, 32))]

    def launch(i):
        gemm.launch(i % copies, a, c, align, top_k, rows, cfg, locks[i % len(locks)])

    us = time_graph(launch, n_launch, args.trials)
    gbs = nbytes / (us * 1e-6) / 1e9
    tflops = flops / (us * 1e-6) / 1e12
    print(f"{name:6} {preset['name']:14} {scheme:10} {M:6d} {us:10.2f} {nbytes / 1e6:10.1f} {gbs:9.1f} "
          f"{tflops:9.1f} {copies:6d}  {describe(cfg, gemm)}", flush=True)


def precompile(gemms, dev):
    """Compile every tile of the pair at once: Humming's compile_many runs NVRTC in parallel threads.
    The kernels land in Humming's disk cache and kernel table, so each case's own call finds them."""
    specs = []
    for gemm, cfgs in gemms:
        try:
            specs += gemm.kernel_specs([c for c in cfgs.values() if isinstance(c, dict)])
        except Exception as err:
            print(f"# precompile: {type(err).__name__}: {str(err)[:300]}", flush=True)
    if specs:
        try:
            H.HummingKernel.compile_many(specs, dev)
        except Exception as err:  # each case compiles its own tile again and reports its own error
            print(f"# precompile: {type(err).__name__}: {str(err)[:300]}", flush=True)


def build_gemm(scheme, preset, n, k, dev, args, head, what):
    """Humming's weights of one GEMM, or None after an `unsupported` line starting with `head`."""
    try:
        return Gemm(scheme, preset["E"], n, k, preset["bias"], dev, args)
    except Exception as err:
        first_line = str(err).splitlines()[0][:300] if str(err) else ""
        print(f"{head} unsupported: building Humming weights{what} failed: {type(err).__name__}: {first_line}",
              flush=True)
        if args.verbose:
            traceback.print_exc()
        return None


def bench_pair(preset_name, scheme, args):
    if args.layer:
        import humming_layer  # next to this file; needs torch, so imported only here
        humming_layer.bench_layer_pair(sys.modules[__name__], preset_name, scheme, args)
        return
    started = time.time()
    dev = cuda_device()
    l2_bytes = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or (60 << 20)
    preset = load_preset(preset_name)
    token_counts = set(args.tokens) | ({args.check_tokens} if args.check_tokens > 0 else set())
    built = []
    for name in ("gemm1", "gemm2"):
        n, k = preset["gemms"][name]
        reason = unsupported_reason(scheme, n, k, args.fp8_scales)
        if reason:
            print(f"{name:6} {preset_name:14} {scheme:10} {'-':>6} unsupported: {reason}", flush=True)
            continue
        gemm = build_gemm(scheme, preset, n, k, dev, args, f"{name:6} {preset_name:14} {scheme:10} {'-':>6}", "")
        if gemm is None:
            torch.cuda.empty_cache()
            continue
        cfgs = {}
        for M in token_counts:
            try:
                cfgs[M] = gemm.tuning(M * preset["top_k"], args.pdl)
            except Exception as err:
                cfgs[M] = err
        built.append((name, gemm, cfgs))
    precompile([(gemm, cfgs) for _, gemm, cfgs in built], dev)
    while built:
        name, gemm, cfgs = built.pop(0)
        if args.check_tokens > 0:
            cfg = cfgs[args.check_tokens]
            try:
                if isinstance(cfg, Exception):
                    raise cfg
                run_check(gemm, name, preset, scheme, args.check_tokens, cfg, args)
            except Exception as err:
                print(f"check  {name:6} {preset_name:14} {scheme:10} M={args.check_tokens:<5d} error: "
                      f"{type(err).__name__}: {str(err)[:300]}", flush=True)
                if args.verbose:
                    traceback.print_exc()
        gemm.drop_reference()
        torch.cuda.empty_cache()
        for M in args.tokens:
            cfg = cfgs[M]
            try:
                if isinstance(cfg, Exception):
                    raise cfg
                time_case(gemm, name, preset, scheme, M, cfg, l2_bytes, args)
            except Exception as err:
                print(f"{name:6} {preset_name:14} {scheme:10} {M:6d} error: {type(err).__name__}: "
                      f"{str(err)[:300]}", flush=True)
                if args.verbose:
                    traceback.print_exc()
        del gemm
        torch.cuda.empty_cache()
    print(f"# {preset_name} {scheme}: {time.time() - started:.0f} s", flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", nargs="+", default=PRESETS, choices=PRESETS)
    ap.add_argument("--scheme", nargs="+", default=SCHEMES, choices=SCHEMES)
    ap.add_argument("--tokens", nargs="+", type=int, default=[1, 16, 64, 256, 1024, 4096])
    ap.add_argument("--trials", type=int, default=7, help="graph replays; the median is printed (moeq: 7)")
    ap.add_argument("--iters", type=int, default=20, help="launches per graph, rounded up to whole rotations")
    ap.add_argument("--check-tokens", type=int, default=8, help="M of the correctness check (0: no check)")
    ap.add_argument("--check-tol", type=float, default=2e-2, help="largest relative error the check accepts")
    ap.add_argument("--fp8-scales", choices=["group", "block"], default="group",
                    help="fp8-block through Humming's fp8 converter (bf16 scale per row and 128 K, as vLLM) "
                         "or Humming's fp32 128x128 BLOCK scales")
    ap.add_argument("--pad-n", type=int, default=256, help="pad N to a multiple (vLLM: 256)")
    ap.add_argument("--pad-k", type=int, default=128, help="pad K to a multiple (vLLM: 128)")
    ap.add_argument("--pdl", choices=["auto", "on", "off"], default="auto",
                    help="programmatic dependent launch: Humming's heuristic choice, or forced")
    ap.add_argument("--layer", action="store_true",
                    help="time the whole experts step (align, GEMM1, activation, GEMM2, top-k weights and sum) "
                         "in one CUDA graph instead of each GEMM (humming_layer.py)")
    ap.add_argument("--layer-act", choices=["humming", "torch"], default="humming",
                    help="layer mode's activation: Humming's process_input kernel or torch ops")
    ap.add_argument("--no-isolate", action="store_true",
                    help="run every preset/scheme in this process (default: one child process each, so a "
                         "kernel fault in one does not lose the others)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main():
    args = parse_args()
    try:
        import_humming()
    except Exception as err:
        print(f"humming is not importable: {type(err).__name__}: {err}", flush=True)
        print("install it first (see the header of this file or scripts/device/humming_anchor.sh)", flush=True)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device", flush=True)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    pairs = [(p, s) for p in args.preset for s in args.scheme]
    if not args.child:
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or (60 << 20)
        print(f"device {props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs, "
              f"L2 {l2 >> 20} MB), torch {torch.__version__}, humming {H.version}")
        print(f"timing: CUDA graph of >= {args.iters} launches, median of {args.trials} replays; weights rotated "
              f"past 3x L2; pad N/K to {args.pad_n}/{args.pad_k}; fp8 scales {args.fp8_scales}; pdl {args.pdl}")
        if args.layer:
            print(f"layer mode: moe align (torch) + GEMM1 + activation ({args.layer_act}) + GEMM2 + top-k weights "
                  "and sum (torch bmm) per step, one CUDA graph")
            print("bytes: codes + scales (moeq canonical) of the experts touched by both GEMMs + hidden read + "
                  "output written (intermediates not counted); FLOPs of both GEMMs\n")
        else:
            print("bytes: codes + scales (moeq canonical) of the experts touched + A read + C written\n")
        print(f"{'gemm':6} {'preset':14} {'scheme':10} {'M':>6} {'time us':>10} {'MB moved':>10} {'GB/s':>9} "
              f"{'TFLOP/s':>9} {'copies':>6}  humming tile{'s' if args.layer else ''}", flush=True)
    if args.child or args.no_isolate or len(pairs) == 1:
        for preset_name, scheme in pairs:
            bench_pair(preset_name, scheme, args)
        return 0
    rc = 0
    passthrough = [a for a in sys.argv[1:]]
    for preset_name, scheme in pairs:
        child_args = strip_options(passthrough, ("--preset", "--scheme"))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--preset", preset_name, "--scheme", scheme,
               *child_args]
        result = subprocess.run(cmd)
        if result.returncode != 0:
            rc = 1
            print(f"# {preset_name} {scheme}: child exited with {result.returncode}", flush=True)
    return rc


def strip_options(argv, names):
    """argv without the options `names` and their values."""
    out, skip = [], False
    for a in argv:
        if skip and not a.startswith("--"):
            continue
        skip = False
        if a in names:
            skip = True
            continue
        if any(a.startswith(n + "=") for n in names):
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
