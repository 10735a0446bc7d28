"""Layer mode of humming_moe.py (`--layer`): the whole MoE experts step with Humming, as an engine runs it.

One step, for M tokens routed to top_k experts each (rows = M * top_k):
  1. moe align of topk_ids [M, top_k]: sorted slot ids padded per expert to GEMM1's block_m, the
     expert of each block, the padded count                                     -- torch ops
  2. GEMM1: hidden [M, K] -> gate_up [rows, N13] (+ bias)                         -- Humming GEMM
  3. gated activation: gate_up -> act [rows, I]                 -- Humming process_input kernel
  4. GEMM2: act [rows, I] -> down [rows, K] (+ bias)                              -- Humming GEMM
  5. router weights and the sum over top_k: out[t] = sum_j w[t, j] * down[t * top_k + j]
     into [M, K] bf16                                                  -- one torch op (bmm)
captured, n steps back to back, in one CUDA graph; the median of --trials replays per step. The
line ends with steps 1, 3 and 5 timed each alone in a graph of its own ("alone us: align .. act ..
reduce .."; approximate, no weight stream beside them), so that their share can be read off.

What Humming 0.1.20 provides for these steps, and what is used:
- moe align: nothing usable. humming.testing.data.generate_moe_tensors builds the same tensors in
  a Python loop over experts with host syncs (its own comment: "TODO: moe_align_block_size cuda
  kernel"), which cannot be captured. Here: moe_align_in_graph below, a sort-free torch version
  (about twenty small kernels, no host sync). vLLM runs its own CUDA kernel
  (moe_align_block_size, one launch).
- activation: the GEMMs have no activation epilogue (the early inclusionAI Humming had one; it was
  removed). Humming's input-processing kernel does it: humming.forward.may_process_input(
  w2 LayerConfig, gate_up, outputs=act, activation_type="binary_split"|"binary_interleaved",
  activation_impl=<C++ expression of float a = gate, b = up>) -> humming.ops.process_input ->
  humming/kernel/process_input.py (ProcessInputKernel, NVRTC), the op Humming fuses with the
  quantization of GEMM2's input when activations are 8/4-bit; with bf16 activations it is the
  activation alone, one kernel, fp32 math, one rounding. `--layer-act torch` uses torch ops
  instead (the fallback, also taken when Humming's kernel fails to build); vLLM runs its own CUDA
  kernels (silu_and_mul, swigluoai_and_mul).
- router weights and top-k reduction: nothing in Humming 0.1.20 (no top-k weight loader in the
  GEMM epilogue, no moe_fused_mul_sum, which older mgoin/humming and vLLM have as a Triton kernel).
  Here: torch.bmm of the bf16 weights [M, 1, top_k] with down viewed [M, top_k, K] (cuBLAS, fp32
  accumulation, one rounding; the weights are rounded to bf16 first, plus one small cast kernel).

Activations (bench/shapes "activation"; the moeq spec's definitions, computed in fp32):
  silu        silu(g) * u, g/u = first/second half of gate_up (vLLM rounds silu(g) to bf16 first)
  swiglu-oai  g = min(g, limit), u = clamp(u, -limit, limit), (u + 1) * g * sigmoid(alpha * g),
              g/u = even/odd columns when "interleaved_gate_up" (gpt-oss), halves otherwise
Other activations print "unsupported" in this mode.

Block sizes: vLLM builds one align with GEMM1's block_m and runs GEMM2 on it, which is only right
when GEMM2's tile has the same block_m. Here GEMM2 gets an align of its own block_m, inside the
step, only when the two differ (`align x2` in the tile column; it adds the second align's time).

Measured as in kernel mode: weights rotated through copies (each step uses one copy for both
GEMMs) so that a pass reads more than 3x the L2; fresh uniform routing per M (the same topk_ids as
kernel mode's timing at that M); topk_weights = softmax of the top_k router scores (fp32).
Bytes: codes + scales (moeq canonical) of the experts touched, both GEMMs, + hidden read + out
written; the intermediates (gate_up, act, down: workspace traffic) are not counted. FLOPs: both
GEMMs, 2 * rows * (N13 * K + K * I).
Check (--check-tokens M, before timing): the step's output against a float32 torch reference of
the whole step computed from the dequantized canonical weights (relative Frobenius error), plus
the in-graph align against humming_moe.moe_align and the activation kernel against torch on the
same gate_up.
"""
import datetime
import math
import os
import time
import traceback
from types import SimpleNamespace

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


# ----------------------------------------------------------------------------------------------
# Activation

def activation_spec(preset):
    """How to run the preset's gated activation, or None if this mode does not know it."""
    name = preset["activation"]
    interleaved = preset["interleaved"]
    kind = "binary_interleaved" if interleaved else "binary_split"
    if name == "silu":
        expr = "a / (1.0f + expf(-a)) * b"
        return {"name": name, "kind": kind, "interleaved": interleaved, "expr": expr}
    if name == "swiglu-oai":
        alpha, limit = float(preset["alpha"]), float(preset["limit"])
        gate = f"fminf(a, {limit!r}f)"
        up = f"fminf(fmaxf(b, {-limit!r}f), {limit!r}f)"
        expr = f"({up} + 1.0f) * {gate} / (1.0f + expf({-alpha!r}f * {gate}))"
        return {"name": name, "kind": kind, "interleaved": interleaved, "expr": expr,
                "alpha": alpha, "limit": limit}
    return None


def torch_activation(h, spec):
    """float32 [rows, I] of the gated activation of h [rows, 2I] (any float dtype)."""
    h = h.float()
    if spec["interleaved"]:
        g, u = h[:, 0::2], h[:, 1::2]
    else:
        half = h.shape[1] // 2
        g, u = h[:, :half], h[:, half:]
    if spec["name"] == "silu":
        return F.silu(g) * u
    limit = spec["limit"]
    g = g.clamp(max=limit)
    u = u.clamp(min=-limit, max=limit)
    return (u + 1.0) * g * torch.sigmoid(spec["alpha"] * g)


class Activation:
    """gate_up -> act with Humming's process_input kernel, or with torch ops."""

    def __init__(self, spec, mode, gemm2_config, pdl):
        from humming.forward import may_process_input
        self.spec, self.mode, self.config = spec, mode, gemm2_config
        self.may_process_input = may_process_input
        self.use_pdl = None if pdl == "auto" else pdl == "on"  # None: Humming's own choice

    def __call__(self, gate_up, act):
        if self.mode == "humming":
            self.may_process_input(self.config, gate_up, outputs=act, activation_type=self.spec["kind"],
                                   activation_impl=self.spec["expr"], use_pdl=self.use_pdl)
        else:
            act.copy_(torch_activation(gate_up, self.spec))

    def probe(self, dev, width):
        """Build Humming's activation kernels now (all row ranges at once); fall back to torch if that fails."""
        if self.mode != "humming":
            return
        try:
            x = torch.randn(4, width, device=dev).to(BF16)
            y = torch.empty(4, width // 2, device=dev, dtype=BF16)
            self(x, y)
            torch.cuda.synchronize()
        except Exception as err:
            print(f"# activation: Humming process_input failed ({type(err).__name__}: {str(err)[:200]}); "
                  "torch ops instead", flush=True)
            self.mode = "torch"


# ----------------------------------------------------------------------------------------------
# Routing and moe align

def routing(M, E, top_k, seed, dev):
    """topk_ids [M, top_k] (int64; the same as humming_moe.random_routing with this seed) and
    topk_weights [M, top_k] float32 (softmax over the chosen scores, renormalized as Qwen3 and gpt-oss do)."""
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    scores, ids = torch.rand(M, E, generator=gen, device=dev).topk(top_k, dim=1)
    return ids, torch.softmax(scores, dim=1)


def align_capacity(numel, E, block_m):
    """Length of sorted_ids that holds any routing of numel slots: numel + min(E, numel) * (block_m - 1),
    rounded up to whole blocks."""
    cap = numel + min(E, numel) * (block_m - 1)
    return (cap + block_m - 1) // block_m * block_m


def moe_align_in_graph(topk_ids, E, block_m):
    """The tensors of humming_moe.moe_align without a host sync or data-dependent shape (capturable).

    A token goes to distinct experts, so the rank of slot (t, j) among expert e's slots is the number
    of earlier tokens routed to e: an exclusive cumsum over tokens of the [M, E] routing mask. Slots
    land at start(e) + rank (increasing slot order within an expert, as moe_align); the rest of
    sorted_ids holds the pad value M * top_k. expert_ids covers every block of the capacity; blocks
    past num_tokens_padded (never read by the kernel) get expert E - 1."""
    dev = topk_ids.device
    M, top_k = topk_ids.shape
    numel = M * top_k
    ids = topk_ids.long()
    hits = torch.zeros(M, E, dtype=torch.int32, device=dev).scatter_(1, ids, 1)
    earlier = torch.cumsum(hits, dim=0, dtype=torch.int32) - hits
    counts = earlier[-1] + hits[-1]
    padded = (counts + (block_m - 1)) // block_m * block_m
    ends = torch.cumsum(padded, dim=0, dtype=torch.int32)
    dest = (ends - padded)[ids] + earlier.gather(1, ids)
    cap = align_capacity(numel, E, block_m)
    sorted_ids = torch.full((cap,), numel, dtype=torch.int32, device=dev)
    sorted_ids.scatter_(0, dest.reshape(-1).long(), torch.arange(numel, dtype=torch.int32, device=dev))
    block_starts = torch.arange(0, cap, block_m, dtype=torch.int32, device=dev)
    expert_ids = torch.searchsorted(ends, block_starts, right=True).clamp_(max=E - 1).to(torch.int32)
    return sorted_ids, expert_ids, ends[-1:]


# ----------------------------------------------------------------------------------------------
# One step

class Step:
    """Buffers and launches of the experts step at M tokens (one routing, one hidden)."""

    def __init__(self, m, g1, g2, act, preset, topk_ids, topk_w, hidden, cfg1, cfg2, n_locks):
        self.m, self.g1, self.g2, self.act_fn = m, g1, g2, act
        self.E, self.top_k = preset["E"], preset["top_k"]
        self.M = topk_ids.shape[0]
        self.rows = self.M * self.top_k
        self.topk_ids, self.topk_w, self.hidden = topk_ids, topk_w, hidden
        self.cfg1, self.cfg2 = cfg1, cfg2
        self.bm1, self.bm2 = cfg1["block_shape"][0], cfg2["block_shape"][0]
        dev = hidden.device
        self.gate_up = torch.empty(self.rows, g1.n, device=dev, dtype=BF16)
        self.act = torch.empty(self.rows, g2.k, device=dev, dtype=BF16)
        self.down = torch.empty(self.rows, g2.n, device=dev, dtype=BF16)
        self.out3 = torch.empty(self.M, 1, g2.n, device=dev, dtype=BF16)
        self.out = self.out3.view(self.M, g2.n)
        self.locks = [torch.zeros(self.m.LOCK_WORDS, dtype=torch.int32, device=dev) for _ in range(n_locks)]

    def align(self):
        align1 = moe_align_in_graph(self.topk_ids, self.E, self.bm1)
        align2 = align1 if self.bm2 == self.bm1 else moe_align_in_graph(self.topk_ids, self.E, self.bm2)
        return align1, align2

    def activation(self):
        self.act_fn(self.gate_up, self.act)

    def reduce(self):
        weights = self.topk_w.to(BF16).unsqueeze(1)
        torch.bmm(weights, self.down.view(self.M, self.top_k, self.g2.n), out=self.out3)

    def run(self, copy, i=0):
        align1, align2 = self.align()
        locks1 = self.locks[(2 * i) % len(self.locks)]
        locks2 = self.locks[(2 * i + 1) % len(self.locks)]
        self.g1.launch(copy, self.hidden, self.gate_up, align1, self.top_k, self.rows, self.cfg1, locks1)
        self.activation()
        self.g2.launch(copy, self.act, self.down, align2, 1, self.rows, self.cfg2, locks2)
        self.reduce()

    def describe(self):
        text = (f"g1[{self.m.describe(self.cfg1, self.g1)}] g2[{self.m.describe(self.cfg2, self.g2)}] "
                f"act={self.act_fn.mode}")
        return text + (" align x2" if self.bm1 != self.bm2 else "")


def reference(step, spec):
    """float32 [M, K] of the whole step from the dequantized canonical weights (independent of Humming)."""
    g1, g2, top_k = step.g1, step.g2, step.top_k
    flat = step.topk_ids.reshape(-1)
    down = torch.zeros(step.rows, g2.n, device=flat.device)
    for e in flat.unique().tolist():
        slots = (flat == e).nonzero().squeeze(1)
        h = step.hidden[slots // top_k].float() @ g1.dequant_expert(e).T
        if "bias" in g1.canon:
            h += g1.canon["bias"][e].float()
        y = torch_activation(h, spec) @ g2.dequant_expert(e).T
        if "bias" in g2.canon:
            y += g2.canon["bias"][e].float()
        down[slots] = y
    return (down.view(step.M, top_k, g2.n) * step.topk_w.unsqueeze(-1)).sum(1)


def rel_err(x, ref):
    return ((x.float() - ref).norm() / ref.norm()).item()


def run_layer_check(ctx, M, cfg1, cfg2):
    m, g1, g2, preset, spec, args = ctx.m, ctx.g1, ctx.g2, ctx.preset, ctx.spec, ctx.args
    dev = g1.dev
    topk_ids, topk_w = routing(M, preset["E"], preset["top_k"], 7 + M, dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(11 + M)
    hidden = torch.randn(M, g1.k, generator=gen, device=dev).to(BF16)
    step = Step(m, g1, g2, ctx.act, preset, topk_ids, topk_w, hidden, cfg1, cfg2, 2)
    for t in (step.gate_up, step.act, step.down, step.out):
        t.fill_(float("nan"))
    step.run(0)
    torch.cuda.synchronize()
    align_ok = True
    for bm in sorted({step.bm1, step.bm2}):
        mine = moe_align_in_graph(topk_ids, preset["E"], bm)
        theirs = m.moe_align(topk_ids, preset["E"], bm)
        total = int(theirs[2].item())
        align_ok &= int(mine[2].item()) == total
        align_ok &= bool(torch.equal(mine[0][:total], theirs[0])) and bool((mine[0][total:] == step.rows).all())
        align_ok &= bool(torch.equal(mine[1][:total // bm], theirs[1]))
    act_err = rel_err(step.act, torch_activation(step.gate_up, spec))
    rel = rel_err(step.out, reference(step, spec))
    ok = math.isfinite(rel) and rel < args.check_tol and align_ok and act_err < args.check_tol
    print(f"check  layer  {preset['name']:14} {ctx.scheme:10} M={M:<5d} rel_err={rel:.2e} act_vs_torch={act_err:.1e} "
          f"align={'ok' if align_ok else 'MISMATCH'} {'ok' if ok else 'MISMATCH'}  [{step.describe()}]", flush=True)


def mark_phase(name):
    """With MOEQ_PHASES set, appends `timestamp name` to that file: the phase marks of scripts/device/clock_summary.py
    (evidence_lib.sh clocks_mark), so the SM clock can be read over the timed replays alone."""
    path = os.environ.get("MOEQ_PHASES")
    if path:
        with open(path, "a") as f:
            f.write(f"{datetime.datetime.now().strftime('%Y/%m/%d %H:%M:%S.%f')} {name}\n")


def time_layer(ctx, M, cfg1, cfg2):
    m, g1, g2, preset, scheme, args = ctx.m, ctx.g1, ctx.g2, ctx.preset, ctx.scheme, ctx.args
    dev, E, top_k = g1.dev, preset["E"], preset["top_k"]
    rows = M * top_k
    topk_ids, topk_w = routing(M, E, top_k, 99 + M, dev)
    touched = int(topk_ids.unique().numel())
    weight_bytes = (m.expert_weight_bytes(scheme, g1.n, g1.k) + m.expert_weight_bytes(scheme, g2.n, g2.k)) * touched
    nbytes = weight_bytes + 2 * M * g1.k * 2
    flops = 2.0 * rows * (g1.n * g1.k + g2.n * g2.k)
    want = max(1, min(m.MAX_COPIES, math.ceil(3.0 * ctx.l2_bytes / nbytes)))
    copies = min(g1.ensure_copies(want), g2.ensure_copies(want))
    gen = torch.Generator(device=dev)
    gen.manual_seed(5 + M)
    hidden = torch.randn(M, g1.k, generator=gen, device=dev).to(BF16)
    n_launch = math.ceil(max(args.iters, copies) / copies) * copies
    step = Step(m, g1, g2, ctx.act, preset, topk_ids, topk_w, hidden, cfg1, cfg2, min(2 * n_launch, 32))

    def launch(i):
        step.run(i % copies, i)

    mark_phase(f"humming-replays-M{M}")
    us = m.time_graph(launch, n_launch, args.trials)
    mark_phase(f"humming-after-replays-M{M}")
    # The steps around the GEMMs, each alone in a graph of its own (approximate: no weights streaming
    # beside them), so that the GEMMs' share and the torch ops' cost can be read off the line.
    alone = {name: m.time_graph(lambda i, fn=fn: fn(), args.iters, args.trials)
             for name, fn in (("align", step.align), ("act", step.activation), ("reduce", step.reduce))}
    gbs = nbytes / (us * 1e-6) / 1e9
    tflops = flops / (us * 1e-6) / 1e12
    parts = " ".join(f"{name} {t:.1f}" for name, t in alone.items())
    print(f"{'layer':6} {preset['name']:14} {scheme:10} {M:6d} {us:10.2f} {nbytes / 1e6:10.1f} {gbs:9.1f} "
          f"{tflops:9.1f} {copies:6d}  {step.describe()} | alone us: {parts}", flush=True)


# ----------------------------------------------------------------------------------------------
# One preset and scheme

def bench_layer_pair(m, preset_name, scheme, args):
    """Layer mode for one preset and scheme; m is the humming_moe module (its helpers, with humming imported)."""
    started = time.time()
    dev = m.cuda_device()
    l2_bytes = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or (60 << 20)
    preset = m.load_preset(preset_name)
    head = f"{'layer':6} {preset_name:14} {scheme:10} {'-':>6}"
    spec = activation_spec(preset)
    if spec is None:
        print(f"{head} unsupported: activation {preset['activation']} in layer mode", flush=True)
        return
    gemms = []
    for name in ("gemm1", "gemm2"):
        n, k = preset["gemms"][name]
        reason = m.unsupported_reason(scheme, n, k, args.fp8_scales)
        if reason:
            print(f"{head} unsupported: {name}: {reason}", flush=True)
            return
        gemm = m.build_gemm(scheme, preset, n, k, dev, args, head, f" of {name}")
        if gemm is None:
            return
        gemms.append(gemm)
    g1, g2 = gemms
    token_counts = set(args.tokens) | ({args.check_tokens} if args.check_tokens > 0 else set())
    cfgs = {}
    for M in token_counts:
        try:
            cfgs[M] = (g1.tuning(M * preset["top_k"], args.pdl), g2.tuning(M * preset["top_k"], args.pdl))
        except Exception as err:
            cfgs[M] = err
    tiles = [c for c in cfgs.values() if isinstance(c, tuple)]
    m.precompile([(g1, {i: c[0] for i, c in enumerate(tiles)}), (g2, {i: c[1] for i, c in enumerate(tiles)})], dev)
    act = Activation(spec, args.layer_act, g2.config, args.pdl)
    act.probe(dev, g1.n)
    ctx = SimpleNamespace(m=m, g1=g1, g2=g2, act=act, spec=spec, preset=preset, scheme=scheme, args=args,
                          l2_bytes=l2_bytes)

    def case(what, M, fn):
        try:
            if isinstance(cfgs[M], Exception):
                raise cfgs[M]
            fn(ctx, M, *cfgs[M])
        except Exception as err:
            print(f"{what} error: {type(err).__name__}: {str(err)[:300]}", flush=True)
            if args.verbose:
                traceback.print_exc()

    if args.check_tokens > 0:
        M = args.check_tokens
        case(f"check  layer  {preset_name:14} {scheme:10} M={M:<5d}", M, run_layer_check)
    g1.drop_reference()
    g2.drop_reference()
    torch.cuda.empty_cache()
    for M in args.tokens:
        case(f"{'layer':6} {preset_name:14} {scheme:10} {M:6d}", M, time_layer)
    g1.copies.clear()
    g2.copies.clear()
    torch.cuda.empty_cache()
    print(f"# {preset_name} {scheme} layer: {time.time() - started:.0f} s", flush=True)
