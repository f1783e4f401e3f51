"""Contraction records of ``benchmarks/backend.py``: the shapes of real workloads.

A third arm, "plain nest", lowers the same plan without the microkernel (the
register-blocked nest used before it), so before and after are timed side by side.
Where the traced plan has more than one member (attention's scores: the product, then
its scale), a fourth arm compiles it with ``fusion="greedy"``, so the tail runs as the
microkernel's epilogue; the plain arms keep it a separate pass, as NumPy does. For
each linear a fifth arm binds the weight with ``params=`` (its panels packed once, at
load; ``weft.lower.contraction_prepack``) against "weft inference" packing it per call;
a BERT-small MLP linear over 128 tokens is the shape where that share is large.

Each shape is traced through ``weft.nn`` exactly as the workload reads it (a linear
over window-partition views, over permuted attention heads, with PyTorch's (out, in)
weights) and compiled unfused; NumPy computes the same product on contiguous
operands (it is not charged for the views: a favourable yardstick for NumPy). Beside
each time: the fraction of the **measured FMA peak** (independent 16-lane FMA chains
in registers, ``measure_fma_peak``, on every thread at once) at that thread count.

- ``vit-block`` (SAM 3 block, 72 x 72 tokens, dim 1024, 24 x 24 windows, 16 heads of 64,
  MLP 4096): qkv, proj, fc1, fc2 linears; attention's scores (q k^T * scale) and
  probabilities x V per window and head;
- ``qwen-decode-step`` matrix-vector products (hidden 896, 2 KV heads of 64, MLP 4864):
  bandwidth-bound, so their figure is GB/s of weights streamed, not % of the FMA peak.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

FMA_SOURCE = r"""
#include <omp.h>
typedef float vf __attribute__((vector_size(64)));
/* 12 independent FMA chains per thread (latency 4 x 2 pipes needs 8): the register peak */
double fma_rate(long iterations, int threads) {
    double start = omp_get_wtime();
    float sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+:sink)
    {
        vf a[12], x = (vf){0} + 0.999f, y = (vf){0} + 0.001f;
        for (int i = 0; i < 12; i++) a[i] = (vf){0} + (float)i;
        for (long it = 0; it < iterations; it++) {
            #pragma GCC unroll 12
            for (int i = 0; i < 12; i++) a[i] = a[i] * x + y;
        }
        for (int i = 0; i < 12; i++) sink += a[i][0];
    }
    double seconds = omp_get_wtime() - start;
    return sink == 12345.0f ? 0.0 : iterations * 12.0 * 16 * 2 * threads / seconds;
}
"""


def measure_fma_peak(threads: int, repeats: int = 5, cc: str = "cc") -> float:
    """FLOP/s of independent AVX-512 FMA chains on ``threads`` threads (best of ``repeats``)."""
    with tempfile.TemporaryDirectory() as folder:
        source, library = Path(folder, "fma.c"), Path(folder, "fma.so")
        source.write_text(FMA_SOURCE)
        subprocess.run([cc, "-O2", "-march=native", "-ffp-contract=fast", "-fopenmp", "-fPIC", "-shared",
                        "-o", str(library), str(source)], check=True)
        rate = ctypes.CDLL(str(library)).fma_rate
        rate.restype, rate.argtypes = ctypes.c_double, (ctypes.c_long, ctypes.c_int)
        return max(rate(20_000_000, threads) for _ in range(repeats))


FUSED_TAIL_ARM = "weft inference, tail fused (greedy)"
BOUND_ARM = "weft inference, weight bound (params=)"
LINEAR_PLANS = ("qkv", "proj", "fc1", "fc2", "bert_fc1")  # traced plans whose second input is a weight


def _trace(fn, shapes, name):
    import weft

    return weft.trace(fn, *[weft.spec(s) for s in shapes], name=name)


def vit_cases(tokens_side: int = 72, dim: int = 1024, window: int = 24, heads: int = 16, mlp: int = 4096):
    """(name, plan, weft inputs, numpy function, numpy inputs, FLOPs) of each vit-block contraction."""
    from weft import nn

    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    cells = -(-tokens_side // window)
    groups, tokens, head_dim = cells * cells, window * window, dim // heads
    rows = groups * tokens
    x = f32(1, tokens_side, tokens_side, dim)
    w_qkv, w_proj, w_fc1, w_fc2 = f32(3 * dim, dim), f32(dim, dim), f32(mlp, dim), f32(dim, mlp)
    attended = f32(groups, heads, tokens, head_dim)
    hidden = f32(1, tokens_side, tokens_side, mlp)
    q, k, v, probs = (f32(groups, heads, tokens, head_dim), f32(groups, heads, tokens, head_dim),
                      f32(groups, tokens, 3 * dim), f32(groups, heads, tokens, tokens))
    x_rows = np.ascontiguousarray(x.reshape(-1, dim))
    cases = [
        ("vit qkv linear (window views)",
         _trace(lambda x, w: nn.linear(nn.window_partition(x, window).reshape(groups, tokens, dim), w),
                [x.shape, w_qkv.shape], "qkv"),
         (x, w_qkv), lambda a, w: a @ w.T, (x_rows, w_qkv), 2.0 * rows * 3 * dim * dim),
        ("vit proj linear (permuted heads)",
         _trace(lambda a, w: nn.linear(nn.permute(a, 0, 2, 1, 3).reshape(groups, window, window, dim), w),
                [attended.shape, w_proj.shape], "proj"),
         (attended, w_proj), lambda a, w: a @ w.T,
         (np.ascontiguousarray(attended.transpose(0, 2, 1, 3).reshape(-1, dim)), w_proj), 2.0 * rows * dim * dim),
        ("vit mlp fc1", _trace(lambda x, w: nn.linear(x, w), [x.shape, w_fc1.shape], "fc1"), (x, w_fc1),
         lambda a, w: a @ w.T, (x_rows, w_fc1), 2.0 * rows * mlp * dim),
        ("vit mlp fc2", _trace(lambda h, w: nn.linear(h, w), [hidden.shape, w_fc2.shape], "fc2"), (hidden, w_fc2),
         lambda a, w: a @ w.T, (np.ascontiguousarray(hidden.reshape(-1, mlp)), w_fc2), 2.0 * rows * dim * mlp),
        ("vit attention scores q k^T * scale",
         _trace(lambda q, k: nn.matmul(q, nn.transpose(k, -2, -1)) * (head_dim ** -0.5), [q.shape, k.shape], "scores"),
         (q, k), lambda q, k: np.matmul(q, k.transpose(0, 1, 3, 2)) * np.float32(head_dim ** -0.5), (q, k),
         2.0 * groups * heads * tokens * tokens * head_dim),
        ("vit attention probs x V (V from the qkv rows)",
         _trace(lambda p, v: nn.matmul(p, nn.permute(v[:, :, 2 * dim:].reshape(groups, tokens, heads, head_dim),
                                                     0, 2, 1, 3)), [probs.shape, v.shape], "pv"),
         (probs, v), lambda p, v: np.matmul(p, v), (probs, np.ascontiguousarray(
             v[:, :, 2 * dim:].reshape(groups, tokens, heads, head_dim).transpose(0, 2, 1, 3))),
         2.0 * groups * heads * tokens * tokens * head_dim),
    ]
    return cases


def bert_cases(tokens: int = 128, hidden: int = 384, mlp: int = 1536):
    """A BERT-small layer's MLP linear over one 128-token sequence: few rows, so packing the
    weight on every call is a large share of the call (the bound-weight arm's case)."""
    from weft import nn

    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, tokens, hidden), dtype=np.float32)
    w = rng.standard_normal((mlp, hidden), dtype=np.float32)
    plan = _trace(lambda x, w: nn.linear(x, w), [x.shape, w.shape], "bert_fc1")
    return [(f"bert linear {tokens} tokens ({hidden} -> {mlp})", plan, (x, w), lambda a, w: a @ w.T,
             (np.ascontiguousarray(x.reshape(-1, hidden)), w), 2.0 * tokens * mlp * hidden)]


def qwen_cases(hidden: int = 896, kv: int = 128, mlp: int = 4864):
    """Decode's matrix-vector products: (1, hidden) @ W^T for the q, k/v, gate/up and down weights."""
    from weft import nn

    rng = np.random.default_rng(1)
    cases = []
    for name, out_features, in_features in (("q/o", hidden, hidden), ("k/v", kv, hidden), ("gate/up", mlp, hidden),
                                            ("down", hidden, mlp)):
        x = rng.standard_normal((1, in_features), dtype=np.float32)
        w = rng.standard_normal((out_features, in_features), dtype=np.float32)
        plan = _trace(lambda x, w: nn.linear(x, w), [x.shape, w.shape], f"mv_{name.replace('/', '_')}")
        cases.append((f"qwen decode {name} x W^T ({out_features}x{in_features})", plan, (x, w),
                      lambda a, w: a @ w.T, (x, w), 2.0 * out_features * in_features))
    return cases


def compile_plain_nest(plan, contract: str, threads: int):
    """The same plan lowered without the microkernel (the plain register-blocked nest Weft used
    before it): the 'before' arm, compiled through the same stages as ``weft.compile``."""
    from weft.codegen.cpu import cpu_features, lanes_for
    from weft.compile import CompiledPlan, build, plan_arena, render_source
    from weft.config import config_from_env
    from weft.lower.schedule import Target, lower_plan

    config = config_from_env(contract=contract, threads=threads)
    target = Target(lanes=lanes_for(cpu_features()), contract=contract, microkernel=False)
    lowered = lower_plan(plan, None, target)
    arena = plan_arena(plan, lowered)
    artifact = build(render_source(plan, lowered, arena), config.cc, config.cache_dir, config.contract)
    return CompiledPlan(plan, config, lowered, arena, artifact)


def contraction_shape_records(threads: int, blocks: int, interleaved, quick: bool = False) -> list[dict]:
    """Weft (Inference and Strict) beside NumPy on each shape, interleaved, at ``threads``."""
    import weft
    from weft.cost.machine import set_blas_threads
    from weft.lower.contraction import ContractionNest

    set_blas_threads(threads)
    peak_before = measure_fma_peak(threads)
    cases = vit_cases(tokens_side=48 if quick else 72) + bert_cases() + qwen_cases()
    records = []
    for name, plan, arrays, numpy_fn, numpy_arrays, flops in cases:
        calls, served = {}, {}
        for contract in ("inference", "strict"):
            compiled = weft.compile(plan, contract=contract, threads=threads)
            calls[f"weft {contract}"] = compiled.prepare(*arrays)
            nests = [n for f in compiled.lowered.functions for n in f.nests]
            served[contract] = "; ".join(n.describe() for n in nests)
            microkernel = any(isinstance(n, ContractionNest) for n in nests)
        if microkernel:
            calls["weft plain nest (inference)"] = compile_plain_nest(plan, "inference", threads).prepare(*arrays)
        if len(plan.kernels) > 1:  # q k^T then its scale: the scale as the microkernel's epilogue
            fused = weft.compile(plan, contract="inference", threads=threads, fusion="greedy")
            calls[FUSED_TAIL_ARM] = fused.prepare(*arrays)
            served["inference, tail fused"] = "; ".join(n.describe() for f in fused.lowered.functions for n in f.nests)
        if plan.name in LINEAR_PLANS and microkernel:  # the weight bound with params=: packed once, at load
            bound = weft.compile(plan, contract="inference", threads=threads, params={plan.inputs[1]: arrays[1]})
            calls[BOUND_ARM] = bound.prepare(arrays[0])
            served["inference, weight bound"] = "; ".join(n.describe() for f in bound.lowered.functions for n in f.nests)
        calls["numpy"] = lambda fn=numpy_fn, a=numpy_arrays: fn(*a)
        timing = interleaved(calls, blocks, 0.2)
        medians = timing["median_s"]
        weights = sum(a.nbytes for a in arrays[1:])
        record = {
            "record": name, "threads": threads, "flops": flops, "served_by": served, "microkernel": microkernel,
            "median_s": medians, "gflop_per_s": {arm: flops / s / 1e9 for arm, s in medians.items()},
            "ratio_to_numpy": {arm: medians["numpy"] / s for arm, s in medians.items() if arm != "numpy"},
            "spread": timing["spread"], "blocks": timing["blocks"], "inner": timing["inner"],
            "weight_bytes": weights,
            "weight_gb_per_s": {arm: weights / s / 1e9 for arm, s in medians.items()},
        }
        records.append(record)
    peak_after = measure_fma_peak(threads)
    peak = max(peak_before, peak_after)
    for record in records:
        record["fma_peak_flops_per_s"] = peak
        record["fma_peak_before_after"] = [peak_before, peak_after]
        record["fraction_of_fma_peak"] = {arm: g * 1e9 / peak for arm, g in record["gflop_per_s"].items()}
    set_blas_threads(os.cpu_count() or 1)
    return records


def print_shape_records(records: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Contractions of real workloads (Weft unfused vs NumPy, interleaved)", title_justify="left")
    for column in ("shape", "thr", "weft inference", "weft strict", "plain nest (before)", "tail fused",
                   "weight bound", "numpy", "inf/np", "strict/np", "spread"):
        table.add_column(column)
    for r in records:
        def cell(arm, r=r):
            if arm not in r["median_s"]:
                return "-"
            return (f"{r['median_s'][arm] * 1e3:.2f} ms {r['gflop_per_s'][arm]:.0f} GF/s "
                    f"({r['fraction_of_fma_peak'][arm]:.0%} pk)")
        table.add_row(r["record"], str(r["threads"]), cell("weft inference"), cell("weft strict"),
                      cell("weft plain nest (inference)"), cell(FUSED_TAIL_ARM), cell(BOUND_ARM), cell("numpy"),
                      f"{r['ratio_to_numpy']['weft inference']:.2f}x", f"{r['ratio_to_numpy']['weft strict']:.2f}x",
                      f"{r['spread']:.1%}")
    Console(width=250).print(table)
    peaks = sorted({(r["threads"], r["fma_peak_flops_per_s"]) for r in records})
    print("measured FMA peak: " + ", ".join(f"{p / 1e9:.0f} GFLOP/s at {t} thread(s)" for t, p in peaks))
    print(f"load average at the end: {os.getloadavg()}; time {time.strftime('%H:%M:%S')}")
