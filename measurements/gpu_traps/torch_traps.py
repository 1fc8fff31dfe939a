#!/usr/bin/env python3
"""Traps 1, 4 and 7 produced on purpose on a CUDA GPU, each beside its fixed twin, recorded with
the PyTorch profiler as Chrome traces (what ``mcp-bench diagnose --trace`` reads).

- trap 1 (kernel fusion split): one decode step of a small decoder run eagerly (many tiny kernels,
  the GPU waiting for each launch) against the same model through ``torch.compile`` (fused
  kernels) with and without CUDA graphs (``mode="reduce-overhead"``: no launch gaps).
- trap 4 (precision breakpoint): eight ``model.layers.N`` blocks in bf16, against the same blocks
  with layer 5 stored as INT4 and dequantised by plain tensor ops on every call (no native INT4
  kernel); the output drift of the INT4 model is printed beside it.
- trap 7 (pipeline gap): batches copied from pageable host memory and then computed on one stream,
  against pinned batches prefetched on a copy stream while the previous batch computes.

Each variant's trace is written to ``OUT/<name>.trace.json`` and a summary line per variant to
``OUT/torch_traps.json``. Needs PyTorch with CUDA only.

    python3 measurements/gpu_traps/torch_traps.py --out /tmp/traps
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

DT = torch.bfloat16


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def trace_steps(path: Path, step: Callable[[], Any], active: int, warmup: int = 2) -> float:
    """Profile ``active`` steps after ``warmup`` unrecorded ones; returns the mean wall ms per step."""
    sched = schedule(wait=1, warmup=warmup, active=active, repeat=1)
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(
        activities=acts, schedule=sched, on_trace_ready=lambda p: p.export_chrome_trace(str(path))
    ) as p:
        for _ in range(1 + warmup):
            step()
            p.step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(active):
            step()
            p.step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / active * 1e3
    return wall


# ---------------------------------------------------------------- trap 1: a decode step


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Written out op by op, as an unfused model does."""
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + 1e-6)).to(x.dtype) * w


class DecodeBlock(nn.Module):
    """One decoder layer for a single new token per sequence, attending over a fixed cache."""

    def __init__(self, d: int, ff: int, heads: int, batch: int, ctx: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)
        self.n1 = nn.Parameter(torch.ones(d))
        self.n2 = nn.Parameter(torch.ones(d))
        self.register_buffer("k_cache", torch.randn(batch, heads, ctx, self.hd) * 0.5)
        self.register_buffer("v_cache", torch.randn(batch, heads, ctx, self.hd) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, d = x.shape
        q, k, v = self.qkv(rmsnorm(x, self.n1)).view(b, 3, self.heads, self.hd).unbind(1)
        scale = self.hd**-0.5
        s_old = torch.einsum("bhd,bhtd->bht", q, self.k_cache) * scale
        s_new = (q * k).sum(-1, keepdim=True) * scale
        p = torch.softmax(torch.cat([s_old, s_new], -1).float(), -1).to(x.dtype)
        a = torch.einsum("bht,bhtd->bhd", p[..., :-1], self.v_cache) + p[..., -1:] * v
        x = x + self.o(a.reshape(b, d))
        h = rmsnorm(x, self.n2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, layers: int, **kw: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecodeBlock(**kw) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def trap1(out: Path, active: int) -> list[dict[str, Any]]:
    torch.manual_seed(1)
    batch = 16
    with torch.device("cuda"):  # initialised on the GPU: seconds, not a minute, for these sizes
        model = Decoder(8, d=2048, ff=5632, heads=16, batch=batch, ctx=512).to(DT).eval()
    x = torch.randn(batch, 2048, device="cuda", dtype=DT)
    rows = []
    with torch.inference_mode():
        ref = model(x)
        variants: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], bool]] = [
            ("decode_eager", model, False),
            ("decode_compiled", torch.compile(model), False),
            ("decode_compiled_graphs", torch.compile(model, mode="reduce-overhead"), True),
        ]
        for name, fn, graphs in variants:
            torch._dynamo.reset()  # each variant compiles afresh
            t0 = time.perf_counter()
            for _ in range(3):  # compiles (and records the graph) before anything is measured
                if graphs:
                    torch.compiler.cudagraph_mark_step_begin()
                y = fn(x).clone()
            torch.cuda.synchronize()
            warm_s = time.perf_counter() - t0

            def step(fn: Callable[[torch.Tensor], torch.Tensor] = fn, graphs: bool = graphs) -> None:
                if graphs:
                    torch.compiler.cudagraph_mark_step_begin()
                fn(x)

            wall = trace_steps(out / f"{name}.trace.json", step, active)
            rows.append(
                {"trap": 1, "variant": name, "step_ms": wall, "compile_s": warm_s, "rel_err": rel_err(y, ref)}
            )
    return rows


# ---------------------------------------------------------------- trap 4: an INT4 layer


class Mlp(nn.Module):
    def __init__(self, d: int, ff: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(x)))


class Int4Linear(nn.Module):
    """INT4 weights, two per byte, one bf16 scale per group of 128 inputs, dequantised with plain
    tensor ops on every call: the path a runtime takes when it has no native INT4 kernel."""

    def __init__(self, lin: nn.Linear, group: int = 128) -> None:
        super().__init__()
        w = lin.weight.detach().float()
        out_f, in_f = w.shape
        g = w.view(out_f, in_f // group, group)
        scale = g.abs().amax(-1, keepdim=True).clamp_min(1e-8) / 7.0
        q = (torch.round(g / scale).clamp(-8, 7) + 8).to(torch.uint8).view(out_f, in_f)
        self.register_buffer("packed", (q[:, 0::2] << 4) | q[:, 1::2])
        self.register_buffer("scale", scale.to(DT))
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hi = (self.packed >> 4).to(torch.int8) - 8
        lo = (self.packed & 0xF).to(torch.int8) - 8
        q = torch.stack([hi, lo], -1).view(self.packed.shape[0], -1)
        w = (q.view(q.shape[0], -1, self.group).to(DT) * self.scale).view(q.shape)
        return x @ w.t()


def trap4(out: Path, active: int) -> list[dict[str, Any]]:
    torch.manual_seed(4)
    d, ff, n = 4096, 16384, 8
    with torch.device("cuda"):
        layers = nn.ModuleList(Mlp(d, ff) for _ in range(n)).to(DT).eval()
    x = torch.randn(256, d, device="cuda", dtype=DT)

    def forward(mods: nn.ModuleList) -> torch.Tensor:
        h = x
        for i, m in enumerate(mods):
            with record_function(f"model.layers.{i}"):
                h = m(h)
        return h

    rows = []
    with torch.inference_mode():
        ref = forward(layers)
        for name in ("layers_bf16", "layers_int4_layer5"):
            if name == "layers_int4_layer5":
                layers[5].up = Int4Linear(layers[5].up)
                layers[5].down = Int4Linear(layers[5].down)
            y = forward(layers)
            wall = trace_steps(out / f"{name}.trace.json", lambda: forward(layers), active)
            rows.append({"trap": 4, "variant": name, "step_ms": wall, "rel_err_vs_bf16": rel_err(y, ref)})
    return rows


# ---------------------------------------------------------------- trap 7: input copies


def trap7(out: Path, active: int) -> list[dict[str, Any]]:
    torch.manual_seed(7)
    n = 4096
    w = torch.randn(n, n, device="cuda", dtype=DT) / n**0.5
    batches = 6
    host = [torch.randn(n, n) for _ in range(batches)]  # 64 MiB of fp32 each, pageable
    pinned = [t.pin_memory() for t in host]

    def compute(xb: torch.Tensor) -> torch.Tensor:
        h = xb.to(DT)
        for _ in range(12):
            h = torch.tanh(h @ w)
        return h

    def serial() -> None:
        for t in host:
            compute(t.to("cuda"))

    copy_stream = torch.cuda.Stream()

    def pipelined() -> None:
        main = torch.cuda.current_stream()
        bufs: list[torch.Tensor] = []
        ready: list[torch.cuda.Event] = []
        with torch.cuda.stream(copy_stream):
            for t in pinned:  # copy i + 1 runs while batch i computes (fresh buffers, so no wait)
                bufs.append(t.to("cuda", non_blocking=True))
                ev = torch.cuda.Event()
                ev.record(copy_stream)
                ready.append(ev)
        for b, ev in zip(bufs, ready, strict=True):
            main.wait_event(ev)
            b.record_stream(main)
            compute(b)

    rows = []
    with torch.inference_mode():
        a = torch.stack([compute(t.to("cuda")) for t in host])
        for name, fn in (("copy_serial", serial), ("copy_pipelined", pipelined)):
            wall = trace_steps(out / f"{name}.trace.json", fn, active)
            rows.append({"trap": 7, "variant": name, "step_ms": wall})
        b = torch.stack([compute(t.to("cuda", non_blocking=True)) for t in pinned])
        rows.append({"trap": 7, "variant": "check", "rel_err_pinned_vs_pageable": rel_err(b, a)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--traps", default="1,4,7")
    parser.add_argument("--active", type=int, default=3, help="profiled steps per variant")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"1": trap1, "4": trap4, "7": trap7}
    rows: list[dict[str, Any]] = [{"device": torch.cuda.get_device_name(0), "torch": torch.__version__}]
    for t in args.traps.split(","):
        t0 = time.perf_counter()
        rows += runs[t](args.out, args.active)
        print(f"trap {t}: {time.perf_counter() - t0:.1f} s", flush=True)
    (args.out / "torch_traps.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
