#!/usr/bin/env python3
"""A tensor-parallel model server across N ranks (one process per GPU), for measuring trap 5
(hidden NCCL communication wait) and the fairness of several GPUs with ``mcp-bench``.

Why its own server: the hidden wait only exists when real collectives sit between real matrix
products on several devices. Here a small decoder-only transformer is built from a config with
random weights (seeded per layer, nothing downloaded) and split Megatron-style: each rank holds a
slice of the attention heads (QKV column-parallel, the output projection row-parallel) and of the
MLP's hidden columns (up column-parallel, down row-parallel); the residual stream is all-reduced
after each row-parallel layer, and the LM head is split over the vocabulary (each rank's best token
is all-gathered). Rank 0 runs the continuous-batching scheduler and sends every step's plan to
the other ranks over a gloo group on the CPU, so the control traffic never shows up as a collective
kernel on the GPUs. The HTTP side is the launching process, which holds no model and hands requests
to rank 0 through a queue (see :class:`Engine` for why it is not rank 0's own thread).

Trap 5's knobs:

- ``--split balanced``: heads and MLP columns split evenly; ``--split uneven``: the last rank gets
  ``--uneven-factor`` times the share of each other rank, so its peers wait for it inside every
  all-reduce.
- ``--allreduce overlapped``: collectives are queued without a host synchronisation (the CPU
  queues the next layer's kernels while one runs), and a row-parallel product of at least
  ``--overlap-min-rows`` token rows (a prefill's) is cut in two halves whose all-reduces run under
  the other half's product; ``serialised``: before every collective the rank
  waits for its device to drain and then for every peer (a barrier), so nothing overlaps.

``--profile DIR`` writes one PyTorch profiler Chrome trace per rank (``tp_rank<R>.trace.json``) for
``--profile-steps`` steps, taken once the running batch first reaches ``--profile-at-batch``; on
CUDA the collectives appear as kernels named ``ncclDevKernel_AllReduce_...`` / ``..._AllGather_...``
(what ``mcp-bench diagnose --trace`` counts as collective: names containing ``nccl``), each step as
``ProfilerStep#N`` on the GPU timeline (``gpu_user_annotation``). ``merge_traces.py`` joins the
ranks' traces into one file with one track per device.

HTTP: ``POST /v1/completions`` (OpenAI text completions; streamed SSE with a usage chunk
when ``stream_options.include_usage``; greedy, never stops before ``max_tokens``; one word is one
token, hashed into the vocabulary; ``"debug_hidden": true`` in a non-streamed request also returns
the final normalised hidden state of the prompt's last position, the same on every rank, for
checking the split against the unsplit model), ``GET /v1/models``, ``/health``, ``/debug/info``
(config and each rank's shard, as the ranks reported it) and ``/metrics`` (Prometheus text):
``vllm:num_requests_running``, ``vllm:num_requests_waiting``, token counters, and per rank
``mcp_tp_rank_step_seconds_total``, ``mcp_tp_rank_collective_seconds_total`` (time the rank's
compute stream waited on collectives: timed with CUDA events on a GPU, wall clock on a CPU),
``mcp_tp_rank_collective_share`` and the shard sizes.

NVLink multicast stays off: ``NCCL_NVLS_ENABLE=0`` (and PyTorch's and NVSHMEM's equivalents) are
forced before any rank starts, whatever the caller's environment says.

    python3 measurements/multi_gpu/tp_server.py --world 2 --preset large --split uneven
    python3 measurements/multi_gpu/tp_server.py --world 2 --device cpu --preset tiny   # gloo
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MODEL = "tp-lm"

PRESETS: dict[str, dict[str, Any]] = {
    # for tests on a CPU: every size divides by 2 and by the uneven split 3:1
    "tiny": {
        "vocab": 512,
        "d_model": 64,
        "layers": 2,
        "heads": 8,
        "ff": 256,
        "max_seq": 128,
        "dtype": "float32",
    },
    # about 0.5 B parameters: a decode step's products are small against its collectives
    "small": {"vocab": 32000, "d_model": 2048, "layers": 8, "heads": 16, "ff": 8192, "max_seq": 1024},
    # about 6 B parameters (a 70B-class layer's width, 8 layers): with two ranks each reads about
    # 0.74 GB of weights per layer and decode step (~0.17 ms on an H200), several times the two
    # all-reduces of a [batch, 8192] activation that the layer needs
    "large": {"vocab": 32000, "d_model": 8192, "layers": 8, "heads": 64, "ff": 28672, "max_seq": 1024},
}
DEFAULTS = {"dtype": "bfloat16", "seed": 0}


def preset(name: str) -> dict[str, Any]:
    return {**DEFAULTS, **PRESETS[name]}


# --------------------------------------------------------------------------- the split


def split_sizes(total: int, world: int, mode: str, factor: float = 3.0) -> list[int]:
    """How many of ``total`` units (heads, MLP columns, vocabulary rows) each rank holds.

    ``balanced``: as even as the total allows. ``uneven``: the last rank weighs ``factor`` and every
    other rank 1, rounded by largest remainder, each rank keeping at least one unit."""
    if world < 1 or total < world:
        raise ValueError(f"cannot split {total} over {world} ranks")
    weights = [1.0] * world
    if mode == "uneven" and world > 1:
        weights[-1] = factor
    elif mode != "balanced" and world > 1:
        raise ValueError(f"unknown split {mode!r}")
    raw = [total * w / sum(weights) for w in weights]
    sizes = [max(1, int(r)) for r in raw]
    order = sorted(range(world), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    i = 0
    while sum(sizes) < total:
        sizes[order[i % world]] += 1
        i += 1
    while sum(sizes) > total:  # only after the at-least-one floor: take from the largest
        sizes[sizes.index(max(sizes))] -= 1
    return sizes


def offsets(sizes: list[int]) -> list[int]:
    out, at = [], 0
    for s in sizes:
        out.append(at)
        at += s
    return out


# --------------------------------------------------------------------------- weights


def global_weights(config: dict[str, Any], device: str) -> dict[str, Any]:
    """Embeddings and LM head of the whole model (the same on every rank and for the reference)."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(config["seed"]) * 1009)
    dtype = getattr(torch, config["dtype"])
    d, v = config["d_model"], config["vocab"]

    def rnd(*shape: int) -> Any:
        return torch.randn(*shape, generator=g, device=device, dtype=dtype) * 0.02

    return {"emb": rnd(v, d), "pos": rnd(config["max_seq"], d), "head": rnd(v, d)}


def layer_weights(config: dict[str, Any], layer: int, device: str) -> dict[str, Any]:
    """One layer's full weights from a per-layer seed: ``qkv [3, heads, head_dim, d]``,
    ``o [d, d]``, ``up [ff, d]``, ``down [d, ff]``. Each rank draws them all and keeps its slice,
    so the split model and the unsplit one hold exactly the same numbers."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(config["seed"]) * 1009 + layer + 1)
    dtype = getattr(torch, config["dtype"])
    d, h, ff = config["d_model"], config["heads"], config["ff"]

    def rnd(*shape: int) -> Any:
        return torch.randn(*shape, generator=g, device=device, dtype=dtype) * 0.02

    return {"qkv": rnd(3, h, d // h, d), "o": rnd(d, d), "up": rnd(ff, d), "down": rnd(d, ff)}


# --------------------------------------------------------------------------- one rank's shard


@dataclass
class Plan:
    """One engine step as every rank runs it: slot moves (compaction after releases), a prefill
    of right-padded prompts into slots ``first..first+P-1``, a decode of slots ``0..n-1``."""

    moves: list[tuple[int, int, int]] = field(default_factory=list)  # (dst, src, tokens)
    prefill: list[list[int]] = field(default_factory=list)
    first: int = 0
    decode_tokens: list[int] = field(default_factory=list)
    decode_positions: list[int] = field(default_factory=list)
    profile: int = 0  # 1: start the profiler before this step
    stop: bool = False

    HEADER = 8

    def encode(self) -> tuple[list[int], list[int]]:
        longest = max((len(p) for p in self.prefill), default=0)
        payload = [x for m in self.moves for x in m]
        payload += [len(p) for p in self.prefill]
        payload += [t for p in self.prefill for t in p + [0] * (longest - len(p))]
        payload += self.decode_tokens + self.decode_positions
        header = [
            int(self.stop),
            len(self.moves),
            len(self.prefill),
            longest,
            self.first,
            len(self.decode_tokens),
            self.profile,
            len(payload),
        ]
        return header, payload

    @classmethod
    def decode(cls, header: list[int], payload: list[int]) -> Plan:
        stop, m, p, longest, first, n, profile, _ = header
        at = 3 * m
        moves = [(payload[3 * i], payload[3 * i + 1], payload[3 * i + 2]) for i in range(m)]
        lengths = payload[at : at + p]
        at += p
        prefill = [payload[at + i * longest : at + i * longest + lengths[i]] for i in range(p)]
        at += p * longest
        return cls(
            moves=moves,
            prefill=prefill,
            first=first,
            decode_tokens=payload[at : at + n],
            decode_positions=payload[at + n : at + 2 * n],
            profile=profile,
            stop=bool(stop),
        )


class Collectives:
    """The data-plane collectives of one rank, timed: the time its compute stream waits on them."""

    def __init__(self, group: Any, mode: str, device: str, overlap_min_rows: int) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.group = torch, dist, group
        self.mode, self.device, self.overlap_min_rows = mode, device, overlap_min_rows
        self.cuda = device.startswith("cuda")
        self.events: list[tuple[Any, Any]] = []
        self.cpu_s = 0.0

    def _begin(self) -> Any:
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def _end(self, begun: Any) -> None:
        if self.cuda:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            self.events.append((begun, ev))
        else:
            self.cpu_s += time.perf_counter() - begun

    def _serialise(self) -> None:
        if self.mode == "serialised":
            if self.cuda:
                self.torch.cuda.synchronize()
            self.dist.barrier(group=self.group)

    def take_seconds(self) -> float:
        """Collective time since the last call (call after the step's work has finished)."""
        total = self.cpu_s + sum(a.elapsed_time(b) for a, b in self.events) / 1e3
        self.events, self.cpu_s = [], 0.0
        return total

    def all_reduce(self, x: Any) -> Any:
        begun = self._begin()
        self._serialise()
        self.dist.all_reduce(x, group=self.group)
        self._end(begun)
        return x

    def row_parallel(self, x: Any, weight: Any) -> Any:
        """``x @ weight.T`` summed over the ranks; overlapped: two halves, each half's all-reduce
        running under the other half's product."""
        F = self.torch.nn.functional
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        rows = flat.shape[0]
        if self.mode != "overlapped" or rows < max(2, self.overlap_min_rows):
            return self.all_reduce(F.linear(flat, weight)).reshape(*shape[:-1], -1)
        half = rows // 2
        y0 = F.linear(flat[:half], weight)
        w0 = self.dist.all_reduce(y0, group=self.group, async_op=True)
        y1 = F.linear(flat[half:], weight)
        w1 = self.dist.all_reduce(y1, group=self.group, async_op=True)
        begun = self._begin()  # from here the stream has nothing left to do but wait
        w0.wait()
        w1.wait()
        self._end(begun)
        return self.torch.cat([y0, y1]).reshape(*shape[:-1], -1)

    def all_gather(self, x: Any) -> Any:
        begun = self._begin()
        self._serialise()
        world = self.dist.get_world_size(self.group)
        out = x.new_empty((world * x.shape[0], *x.shape[1:]))
        # the same collective under its newer name where PyTorch has it (2.13 renamed it)
        gather = getattr(self.dist, "all_gather_single", None) or self.dist.all_gather_into_tensor
        gather(out, x, group=self.group)
        self._end(begun)
        return out.view(world, *x.shape)


class Shard:
    """One rank's slice of the model, its slice of the KV cache, and its step."""

    def __init__(
        self,
        config: dict[str, Any],
        rank: int,
        world: int,
        split: str,
        factor: float,
        device: str,
        max_batch: int,
        comm: Collectives,
    ) -> None:
        import torch

        self.torch, self.config, self.rank, self.device, self.comm = torch, config, rank, device, comm
        d, h = config["d_model"], config["heads"]
        self.hd = d // h
        heads = split_sizes(h, world, split, factor)
        ffs = split_sizes(config["ff"], world, split, factor)
        vocabs = split_sizes(config["vocab"], world, "balanced")
        self.heads, self.ff = heads[rank], ffs[rank]
        h0, f0, v0 = offsets(heads)[rank], offsets(ffs)[rank], offsets(vocabs)[rank]
        self.vocab0 = v0
        g = global_weights(config, device)
        self.emb, self.pos = g["emb"], g["pos"]
        self.head = g["head"][v0 : v0 + vocabs[rank]].clone()
        del g
        self.layers: list[dict[str, Any]] = []
        for i in range(config["layers"]):
            w = layer_weights(config, i, device)
            hs = slice(h0 * self.hd, (h0 + self.heads) * self.hd)
            self.layers.append(
                {
                    "qkv": w["qkv"][:, h0 : h0 + self.heads].reshape(3 * self.heads * self.hd, d).clone(),
                    "o": w["o"][:, hs].clone(),
                    "up": w["up"][f0 : f0 + self.ff].clone(),
                    "down": w["down"][:, f0 : f0 + self.ff].clone(),
                }
            )
            del w
        dtype = getattr(torch, config["dtype"])
        self.cache = torch.zeros(
            (2, config["layers"], max_batch, self.heads, config["max_seq"], self.hd),
            dtype=dtype,
            device=device,
        )
        self.parameters = sum(t.numel() for layer in self.layers for t in layer.values()) + self.head.numel()

    def describe(self) -> list[int]:
        return [self.rank, self.heads, self.ff, self.head.shape[0], self.parameters]

    def _attention_in(self, x: Any, i: int) -> tuple[Any, Any, Any]:
        F = self.torch.nn.functional
        b, t, d = x.shape
        qkv = F.linear(F.rms_norm(x, (d,)), self.layers[i]["qkv"]).view(b, t, 3, self.heads, self.hd)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        return q, k, v

    def _mlp(self, x: Any, i: int) -> Any:
        F = self.torch.nn.functional
        w = self.layers[i]
        return x + self.comm.row_parallel(F.gelu(F.linear(F.rms_norm(x, (x.shape[-1],)), w["up"])), w["down"])

    def _next_tokens(self, h: Any) -> tuple[Any, Any]:
        """Greedy next token of each row of ``h [B, d]`` over the whole vocabulary, and the
        normalised hidden state it was read from."""
        torch, F = self.torch, self.torch.nn.functional
        hn = F.rms_norm(h, (h.shape[-1],))
        best, idx = F.linear(hn, self.head).float().max(-1)
        mine = torch.stack([best, (idx + self.vocab0).float()], -1)  # [B, 2]
        every = self.comm.all_gather(mine)  # [world, B, 2]
        pick = every[:, :, 0].argmax(0)  # first rank on a tie: the lowest index, as argmax does
        tokens = every[pick, torch.arange(h.shape[0], device=h.device), 1].long()
        return tokens, hn

    def prefill(self, prompts: list[list[int]], first: int) -> tuple[Any, Any]:
        torch, F = self.torch, self.torch.nn.functional
        longest = max(len(p) for p in prompts)
        ids = torch.tensor([p + [0] * (longest - len(p)) for p in prompts], device=self.device)
        lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        slots = torch.arange(first, first + len(prompts), device=self.device)
        x = self.emb[ids] + self.pos[:longest]
        b, t, _ = x.shape
        for i in range(len(self.layers)):
            q, k, v = self._attention_in(x, i)
            self.cache[0, i, slots, :, :t] = k
            self.cache[1, i, slots, :, :t] = v
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
            x = self._mlp(x + self.comm.row_parallel(a, self.layers[i]["o"]), i)
        return self._next_tokens(x[torch.arange(b, device=self.device), lengths - 1])

    def decode(self, tokens: list[int], positions: list[int]) -> Any:
        torch, F = self.torch, self.torch.nn.functional
        n = len(tokens)
        tok = torch.tensor(tokens, device=self.device)
        pos = torch.tensor(positions, device=self.device)
        span = max(positions) + 1
        x = (self.emb[tok] + self.pos[pos])[:, None]
        rows = torch.arange(n, device=self.device)
        mask = (torch.arange(span, device=self.device)[None] <= pos[:, None])[:, None, None]
        for i in range(len(self.layers)):
            q, k, v = self._attention_in(x, i)
            self.cache[0, i, rows, :, pos] = k[:, :, 0]
            self.cache[1, i, rows, :, pos] = v[:, :, 0]
            a = F.scaled_dot_product_attention(
                q, self.cache[0, i, :n, :, :span], self.cache[1, i, :n, :, :span], attn_mask=mask
            )
            x = self._mlp(
                x + self.comm.row_parallel(a.transpose(1, 2).reshape(n, 1, -1), self.layers[i]["o"]), i
            )
        return self._next_tokens(x[:, 0])[0]

    def step(self, plan: Plan) -> tuple[list[int], list[int], Any]:
        """Runs one plan; the prefill's and the decode's next tokens and the prefill's hidden states."""
        for dst, src, n in plan.moves:
            self.cache[:, :, dst, :, :n] = self.cache[:, :, src, :, :n]
        first: list[int] = []
        hidden = None
        if plan.prefill:
            toks, hidden = self.prefill(plan.prefill, plan.first)
            first = toks.tolist()
        nxt = self.decode(plan.decode_tokens, plan.decode_positions).tolist() if plan.decode_tokens else []
        return first, nxt, hidden


# --------------------------------------------------------------------------- a rank's process


class Rank:
    """What every rank runs: the process group, its shard, the per-step plan and statistics, and
    the profiler."""

    def __init__(self, args: argparse.Namespace, rank: int, port: int) -> None:
        os.environ.update(NO_MULTICAST)
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.args, self.rank = torch, dist, args, rank
        torch.set_num_threads(args.threads)
        cuda = args.device == "cuda"
        self.device = f"cuda:{rank}" if cuda else "cpu"
        kw: dict[str, Any] = {}
        if cuda:
            torch.cuda.set_device(rank)
            kw["device_id"] = torch.device(self.device)
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=args.world,
            timeout=timedelta(seconds=args.dist_timeout),
            **kw,
        )
        self.tp = dist.group.WORLD
        self.ctrl = dist.new_group(backend="gloo")  # plans and statistics travel on the CPU
        self.comm = Collectives(self.tp, args.allreduce, self.device, args.overlap_min_rows)
        self.config = preset(args.preset)
        if args.dtype:
            self.config["dtype"] = args.dtype
        with torch.inference_mode():
            self.shard = Shard(
                self.config,
                rank,
                args.world,
                args.split,
                args.uneven_factor,
                self.device,
                args.max_batch,
                self.comm,
            )
        self.shards = self.gather_ints(self.shard.describe())
        self.profiler: Any = None
        self.profile_left = 0

    def gather_ints(self, values: list[int]) -> list[list[int]]:
        t = self.torch.tensor(values, dtype=self.torch.int64)
        out = [self.torch.empty_like(t) for _ in range(self.args.world)]
        self.dist.all_gather(out, t, group=self.ctrl)
        return [o.tolist() for o in out]

    def broadcast_plan(self, plan: Plan | None) -> Plan:
        torch = self.torch
        if plan is not None:
            h, p = plan.encode()
            header = torch.tensor(h, dtype=torch.int64)
        else:
            header = torch.empty(Plan.HEADER, dtype=torch.int64)
        self.dist.broadcast(header, 0, group=self.ctrl)
        n = int(header[-1])
        payload = (
            torch.tensor(p, dtype=torch.int64) if plan is not None else torch.empty(n, dtype=torch.int64)
        )
        if n:
            self.dist.broadcast(payload, 0, group=self.ctrl)
        return plan if plan is not None else Plan.decode(header.tolist(), payload.tolist())

    def run_step(self, plan: Plan) -> tuple[list[int], list[int], Any, list[list[float]]]:
        """One step on this rank; every rank's (step seconds, collective seconds), gathered."""
        torch = self.torch
        if plan.profile:
            self._start_profiler()
        cuda = self.device.startswith("cuda")
        t0 = time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        with torch.inference_mode():
            first, nxt, hidden = self.shard.step(plan)
        if cuda:
            end.record()
            end.synchronize()
            step_s = start.elapsed_time(end) / 1e3
        else:
            step_s = time.perf_counter() - t0
        mine = torch.tensor([step_s, self.comm.take_seconds()], dtype=torch.float64)
        every = [torch.empty_like(mine) for _ in range(self.args.world)]
        self.dist.all_gather(every, mine, group=self.ctrl)
        if self.profiler is not None:
            self.profiler.step()
            self.profile_left -= 1
            if self.profile_left <= 0:
                self.profiler.stop()
                self.profiler = None
        return first, nxt, hidden, [e.tolist() for e in every]

    def _start_profiler(self) -> None:
        if self.profiler is not None or not self.args.profile:
            return
        from torch.profiler import ProfilerActivity, profile, schedule

        os.makedirs(self.args.profile, exist_ok=True)
        path = os.path.join(self.args.profile, f"tp_rank{self.rank}.trace.json")
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.startswith("cuda") else [])
        warm = 2
        self.profiler = profile(
            activities=acts,
            schedule=schedule(wait=0, warmup=warm, active=self.args.profile_steps, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(path),
        )
        self.profiler.start()
        self.profile_left = warm + self.args.profile_steps

    def close(self) -> None:
        if self.profiler is not None:
            self.profiler.stop()
        self.dist.destroy_process_group()


def rank_main(args: argparse.Namespace, rank: int, port: int, inbox: Any, outbox: Any) -> None:
    """Every rank's process. Rank 0 runs the engine (fed by the HTTP process through ``inbox``,
    answering through ``outbox``); the others follow rank 0's plans until told to stop. A rank
    whose HTTP process is gone exits."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
    try:
        r = Rank(args, rank, port)
    except Exception as exc:
        if rank == 0:
            outbox.put(("failed", f"rank 0 did not start: {exc!r}"))
        raise
    if rank == 0:
        engine = Engine(r, inbox, outbox)
        engine.warm_up()
        outbox.put(("ready", r.shards))
        engine.run()
    else:
        while True:
            plan = r.broadcast_plan(None)
            if plan.stop:
                break
            r.run_step(plan)
    r.close()


# --------------------------------------------------------------------------- rank 0: the engine


@dataclass
class Seq:
    """One request in the engine."""

    rid: str
    tokens: list[int]
    max_tokens: int
    want_hidden: bool = False
    pos: int = 0
    last: int = 0
    generated: int = 0
    cancelled: bool = False


class Engine:
    """Continuous batching on rank 0: admits waiting requests up to ``max_batch`` and the prefill
    budget, sends each step's plan to every rank, runs its own shard, and sends the step's tokens
    (and the figures /metrics shows) to the HTTP process in one message.

    Why the HTTP side is another process: streaming a token to each of a hundred clients every few
    milliseconds is Python work that, in rank 0's process, would hold the interpreter lock while
    rank 0 should be launching its kernels; its peers would then wait for it in every all-reduce,
    a hidden wait made by the server rather than by the split under test."""

    def __init__(self, rank: Rank, inbox: Any, outbox: Any) -> None:
        self.rank, self.args, self.inbox, self.outbox = rank, rank.args, inbox, outbox
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.by_rid: dict[str, Seq] = {}
        self.moves: list[tuple[int, int, int]] = []
        self.stopping = False
        self.profile_sent = False
        self.profile_armed = False  # set after the warm-up, so the trace shows served load
        self.reset()

    def reset(self) -> None:
        world = self.args.world
        self.step_s, self.coll_s = [0.0] * world, [0.0] * world
        self.steps = self.prompt_tokens = self.generation_tokens = self.finished = 0

    def stats(self) -> dict[str, Any]:
        return {
            "running": len(self.running),
            "waiting": len(self.waiting),
            "steps": self.steps,
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "finished": self.finished,
            "step_s": list(self.step_s),
            "coll_s": list(self.coll_s),
        }

    def _take(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "submit":
            _, rid, ids, n, want_hidden = msg
            seq = Seq(rid, list(ids), int(n), bool(want_hidden))
            self.by_rid[rid] = seq
            self.waiting.append(seq)
        elif msg[0] == "cancel" and msg[1] in self.by_rid:
            self.by_rid[msg[1]].cancelled = True
        elif msg[0] == "stop":
            self.stopping = True

    def _drain(self, block: bool) -> None:
        import queue

        try:
            if block:
                self._take(self.inbox.get(timeout=0.5))
            while True:
                self._take(self.inbox.get_nowait())
        except queue.Empty:
            pass

    def _admit(self) -> list[Seq]:
        admitted: list[Seq] = []
        budget = self.args.prefill_tokens
        while self.waiting and len(self.running) + len(admitted) < self.args.max_batch:
            s = self.waiting[0]
            if s.cancelled:
                self.waiting.popleft()
                self.by_rid.pop(s.rid, None)
                continue
            if admitted and len(s.tokens) > budget:
                break
            self.waiting.popleft()
            budget -= len(s.tokens)
            admitted.append(s)
        return admitted

    def warm_up(self) -> None:
        """One request through every rank before serving: first-call costs stay out of the figures."""
        self._take(("submit", "warm-up", [1, 2, 3], 2, False))
        while self.waiting or self.running:
            self._step()
        self.reset()
        self.profile_armed = bool(self.args.profile)

    def run(self) -> None:
        """The step loop, on rank 0's main thread (where its steps and its profiler run)."""
        while True:
            self._drain(block=not self.waiting and not self.running)
            if self.stopping:
                self.rank.broadcast_plan(Plan(stop=True))
                return
            if self.waiting or self.running:
                self._step()

    def _step(self) -> None:
        admitted = self._admit()
        live = any(s.generated < s.max_tokens for s in self.running)
        plan = Plan(
            moves=self.moves,
            prefill=[s.tokens for s in admitted],
            first=len(self.running),
            decode_tokens=[s.last for s in self.running] if live else [],
            decode_positions=[s.pos for s in self.running] if live else [],
        )
        self.moves = []
        batch = len(self.running) + len(admitted)
        if self.profile_armed and not self.profile_sent and batch >= self.args.profile_at_batch:
            plan.profile, self.profile_sent = 1, True
        self.rank.broadcast_plan(plan)
        try:
            first, nxt, hidden, stats = self.rank.run_step(plan)
        except Exception as exc:  # a rank that fails a step cannot follow the next: stop serving
            import traceback

            traceback.print_exception(exc)
            self.outbox.put(("failed", f"a step failed on rank 0: {exc!r}"))
            time.sleep(1.0)  # let the queue's feeder thread send it
            os._exit(4)
        for r, (step_s, coll_s) in enumerate(stats):
            self.step_s[r] += step_s
            self.coll_s[r] += coll_s
        self.steps += 1
        self._emit(admitted, first, nxt, hidden)

    def _emit(self, admitted: list[Seq], first: list[int], nxt: list[int], hidden: Any) -> None:
        out: dict[str, tuple[list[tuple[int, bool]], list[float] | None]] = {}
        for s, tok in zip(self.running, nxt, strict=False):
            if s.generated < s.max_tokens and not s.cancelled:
                s.pos, s.last, s.generated = s.pos + 1, tok, s.generated + 1
                out.setdefault(s.rid, ([], None))[0].append((tok, s.generated >= s.max_tokens))
        for row, (s, tok) in enumerate(zip(admitted, first, strict=True)):
            s.pos, s.last, s.generated = len(s.tokens), tok, 1
            vec = hidden[row].float().tolist() if s.want_hidden and hidden is not None else None
            self.prompt_tokens += len(s.tokens)
            self.running.append(s)
            out[s.rid] = ([(tok, s.generated >= s.max_tokens)], vec)
        for items, _ in out.values():
            self.generation_tokens += len(items)
            self.finished += sum(done for _, done in items)
        self._release()
        self.outbox.put(("tokens", [(rid, items, vec) for rid, (items, vec) in out.items()], self.stats()))

    def _release(self) -> None:
        """Frees finished and abandoned slots, moving the last running sequence into each freed
        slot (every rank applies the same moves to its cache before the next step)."""
        for i in range(len(self.running) - 1, -1, -1):
            s = self.running[i]
            if s.generated < s.max_tokens and not s.cancelled:
                continue
            self.by_rid.pop(s.rid, None)
            last = len(self.running) - 1
            if i != last:
                moved = self.running[last]
                self.moves.append((i, last, moved.pos))
                self.running[i] = moved
            self.running.pop()


# --------------------------------------------------------------------------- HTTP (no PyTorch)


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def tokenize(text: str, vocab: int) -> list[int]:
    return [zlib.crc32(w.encode()) % vocab for w in text.split()]


class EngineFailed(RuntimeError):
    pass


class Server:
    """The HTTP process: parses requests, hands them to rank 0, streams the tokens back."""

    def __init__(self, args: argparse.Namespace, inbox: Any, outbox: Any, procs: list[Any]) -> None:
        self.args, self.inbox, self.outbox, self.procs = args, inbox, outbox, procs
        self.config = preset(args.preset)
        if args.dtype:
            self.config["dtype"] = args.dtype
        self.shards: list[list[int]] = []
        self.stats: dict[str, Any] = {}
        self.pending: dict[str, asyncio.Queue[tuple[list[tuple[int, bool]], list[float] | None]]] = {}
        self.failed: str | None = None
        self.closing = threading.Event()

    async def start(self, app: Any) -> None:
        loop = asyncio.get_running_loop()
        msg = await loop.run_in_executor(None, self._wait_ready)
        if msg[0] != "ready":
            raise EngineFailed(str(msg[1]))
        self.shards = msg[1]
        print(json.dumps({"event": "ranks up", "shards": self.shards}), flush=True)
        threading.Thread(target=self._read, args=(loop,), name="outbox", daemon=True).start()

    def _wait_ready(self) -> tuple[Any, ...]:
        import queue

        deadline = time.monotonic() + self.args.start_timeout
        while time.monotonic() < deadline:
            try:
                msg: tuple[Any, ...] = self.outbox.get(timeout=1.0)
                if msg[0] in ("ready", "failed"):
                    return msg
            except queue.Empty:
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead:
                    return ("failed", f"rank processes exited before serving: {dead}")
        return ("failed", f"the ranks were not ready within {self.args.start_timeout} s")

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        import queue

        while not self.closing.is_set():
            try:
                msg = self.outbox.get(timeout=0.5)
            except queue.Empty:
                continue
            except (EOFError, OSError):
                return
            loop.call_soon_threadsafe(self._dispatch, msg)

    def _dispatch(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "tokens":
            for rid, items, vec in msg[1]:
                q = self.pending.get(rid)
                if q is not None:
                    q.put_nowait((items, vec))
            self.stats = msg[2]
        elif msg[0] == "failed":
            self.failed = str(msg[1])
            for q in self.pending.values():
                q.put_nowait(([(-1, True)], None))

    async def stop(self, app: Any) -> None:
        self.inbox.put(("stop",))
        loop = asyncio.get_running_loop()
        for p in self.procs:
            await loop.run_in_executor(None, p.join, 60)
            if p.is_alive():
                p.terminate()
        self.closing.set()

    async def _tokens(self, rid: str) -> Any:
        """Yields (token, finished, hidden) for one request until it is finished."""
        q = self.pending[rid]
        while True:
            items, vec = await q.get()
            for tok, done in items:
                if tok < 0:
                    raise EngineFailed(self.failed or "the engine failed")
                yield tok, done, vec
                if done:
                    return

    def _submit(self, ids: list[int], n: int, want_hidden: bool) -> str:
        if self.failed:
            raise EngineFailed(self.failed)
        rid = uuid.uuid4().hex
        self.pending[rid] = asyncio.Queue()
        self.inbox.put(("submit", rid, ids, n, want_hidden))
        return rid

    async def completions(self, request: Any) -> Any:
        from aiohttp import web

        try:
            body = await request.json()
            prompt = body.get("prompt", "")
            prompt = " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)
            n = int(body.get("max_tokens") or 16)
        except (ValueError, TypeError, AttributeError) as exc:
            return web.json_response({"error": {"message": f"bad request: {exc}"}}, status=400)
        ids = tokenize(prompt, self.config["vocab"]) or [0]
        if n < 1 or len(ids) + n > self.config["max_seq"]:
            msg = f"prompt {len(ids)} + max_tokens {n} must be within max_seq {self.config['max_seq']}"
            return web.json_response({"error": {"message": msg}}, status=400)
        try:
            rid = self._submit(ids, n, bool(body.get("debug_hidden")) and not body.get("stream"))
        except EngineFailed as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=503)
        created = int(time.time())
        usage = {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}
        head = {"id": "cmpl-" + rid, "object": "text_completion", "created": created, "model": MODEL}
        try:
            if not body.get("stream"):
                toks: list[int] = []
                hidden = None
                async for tok, _, vec in self._tokens(rid):
                    toks.append(tok)
                    hidden = hidden or vec
                text = "".join(f" t{t}" for t in toks)
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
                out: dict[str, Any] = {**head, "choices": [choice], "usage": usage, "token_ids": toks}
                if hidden is not None:
                    out["hidden"] = hidden
                return web.json_response(out)
            resp = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await resp.prepare(request)
            async for tok, done, _ in self._tokens(rid):
                choice = {
                    "index": 0,
                    "text": f" t{tok}",
                    "logprobs": None,
                    "finish_reason": "length" if done else None,
                }
                await resp.write(_sse({**head, "choices": [choice]}))
            opts = body.get("stream_options") or {}
            if isinstance(opts, dict) and opts.get("include_usage"):
                await resp.write(_sse({**head, "choices": [], "usage": usage}))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        except EngineFailed as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=503)
        except (ConnectionError, asyncio.CancelledError):
            self.inbox.put(("cancel", rid))
            raise
        finally:
            self.pending.pop(rid, None)

    async def metrics(self, request: Any) -> Any:
        from aiohttp import web

        st = self.stats
        world = self.args.world
        step_s = st.get("step_s", [0.0] * world)
        coll_s = st.get("coll_s", [0.0] * world)
        lines: list[str] = []

        def fam(name: str, kind: str, help_text: str, rows: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value:.9g}" for labels, value in rows)

        def one(name: str, kind: str, help_text: str, key: str) -> None:
            fam(name, kind, help_text, [("", float(st.get(key, 0)))])

        one("vllm:num_requests_running", "gauge", "Sequences in the batch.", "running")
        one("vllm:num_requests_waiting", "gauge", "Requests waiting for a slot.", "waiting")
        one("vllm:prompt_tokens_total", "counter", "Prompt tokens prefilled.", "prompt_tokens")
        one("vllm:generation_tokens_total", "counter", "Tokens generated.", "generation_tokens")
        one("vllm:request_success_total", "counter", "Requests finished.", "finished")
        fam("mcp_tp_world_size", "gauge", "Tensor-parallel ranks.", [("", float(world))])
        one("mcp_tp_steps_total", "counter", "Engine steps run by every rank.", "steps")
        rk = [f'{{rank="{r}"}}' for r in range(world)]
        fam(
            "mcp_tp_rank_step_seconds_total",
            "counter",
            "Device time of each rank's steps.",
            list(zip(rk, step_s, strict=True)),
        )
        fam(
            "mcp_tp_rank_collective_seconds_total",
            "counter",
            "Time each rank's compute stream waited on collectives (all-reduce, all-gather, barriers).",
            list(zip(rk, coll_s, strict=True)),
        )
        share = [c / s if s > 0 else 0.0 for c, s in zip(coll_s, step_s, strict=True)]
        fam(
            "mcp_tp_rank_collective_share",
            "gauge",
            "Collective time over step time, since the start.",
            list(zip(rk, share, strict=True)),
        )
        for col, name, help_text in (
            (1, "mcp_tp_rank_heads", "Attention heads held by each rank."),
            (2, "mcp_tp_rank_ffn_columns", "MLP hidden columns held by each rank."),
            (4, "mcp_tp_rank_parameters", "Parameters held by each rank (layers and its LM-head slice)."),
        ):
            fam(name, "gauge", help_text, [(rk[row[0]], float(row[col])) for row in self.shards])
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def info(self, request: Any) -> Any:
        from aiohttp import web

        a = self.args
        keys = ("rank", "heads", "ffn_columns", "vocab_rows", "parameters")
        return web.json_response(
            {
                "model": MODEL,
                "config": self.config,
                "world": a.world,
                "device": a.device,
                "split": a.split,
                "uneven_factor": a.uneven_factor,
                "allreduce": a.allreduce,
                "overlap_min_rows": a.overlap_min_rows,
                "max_batch": a.max_batch,
                "shards": [dict(zip(keys, s, strict=True)) for s in self.shards],
                "env": {k: os.environ.get(k) for k in NO_MULTICAST},
            }
        )

    async def models(self, request: Any) -> Any:
        from aiohttp import web

        data = [{"id": MODEL, "object": "model", "created": 0, "owned_by": "mcp"}]
        return web.json_response({"object": "list", "data": data})

    def app(self) -> Any:
        from aiohttp import web

        app = web.Application()
        app.on_startup.append(self.start)
        app.on_cleanup.append(self.stop)

        async def health(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app.add_routes(
            [
                web.post("/v1/completions", self.completions),
                web.get("/v1/models", self.models),
                web.get("/metrics", self.metrics),
                web.get("/debug/info", self.info),
                web.get("/health", health),
            ]
        )
        return app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8200)
    p.add_argument("--world", type=int, default=2, help="ranks: one per GPU on CUDA, processes on a CPU")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--preset", choices=sorted(PRESETS), default="large")
    p.add_argument("--dtype", help="override the preset's dtype (float32, bfloat16)")
    p.add_argument("--split", choices=("balanced", "uneven"), default="balanced")
    p.add_argument(
        "--uneven-factor", type=float, default=3.0, help="the last rank's weight against 1 for each other"
    )
    p.add_argument("--allreduce", choices=("overlapped", "serialised"), default="overlapped")
    p.add_argument(
        "--overlap-min-rows",
        type=int,
        default=512,
        help="token rows from which a row-parallel product is cut in two (prefill-sized: a decode "
        "batch's all-reduce is latency-bound, and cutting it would only double the latency)",
    )
    p.add_argument("--max-batch", type=int, default=128)
    p.add_argument("--prefill-tokens", type=int, default=4096, help="prompt tokens one step may prefill")
    p.add_argument("--profile", metavar="DIR", help="write a Chrome trace per rank here")
    p.add_argument("--profile-steps", type=int, default=4)
    p.add_argument(
        "--profile-at-batch", type=int, default=1, help="profile once the batch first holds this many"
    )
    p.add_argument("--threads", type=int, default=2, help="CPU threads per rank (torch.set_num_threads)")
    p.add_argument("--dist-port", type=int, default=0, help="rendezvous port (0: a free one)")
    p.add_argument("--dist-timeout", type=float, default=600.0)
    p.add_argument("--start-timeout", type=float, default=900.0, help="seconds for the ranks to be ready")
    return p


def main(argv: list[str] | None = None) -> None:
    """The HTTP process: starts every rank (rank 0 included) in its own process, then serves."""
    args = build_parser().parse_args(argv)
    os.environ.update(NO_MULTICAST)  # before any rank exists, so every process inherits it
    port = args.dist_port or _free_port()
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=rank_main, args=(args, r, port, inbox, outbox), name=f"rank{r}", daemon=True)
        for r in range(args.world)
    ]
    for proc in procs:
        proc.start()
    from aiohttp import web

    server = Server(args, inbox, outbox, procs)
    print(json.dumps({"event": "starting", "port": args.port, "world": args.world}), flush=True)
    web.run_app(server.app(), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
