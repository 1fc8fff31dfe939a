#!/usr/bin/env python3
"""The GPU model server of the measurements: one engine for the reference tables and the
GPU-memory forensics (one GPU), for trap 5 and the fairness of several GPUs (``--tensor-parallel
N``) and for traps 10 and 12 (``--compile``, ``--route``). A decoder-only transformer with a KV
cache (and, in the presets that have one, a patch-embedding image encoder in front) is built from a
preset with random weights from seeded generators (nothing downloaded), every running request is
batched into one forward step (continuous batching), behind the OpenAI chat and completions
endpoints and a vLLM-style ``/metrics``.

Why its own server rather than the reference server: the reference server models latency and
memory; this one spends them, so GPU memory peak %, SM utilisation, the allocator's
fragmentation, the collectives between GPUs and what a PyTorch server keeps after a level are the
hardware's own figures.

Presets: ``small`` (the default: about 250 M parameters with the image encoder, the reference
table's model) and ``tiny`` (for tests on a CPU) are served as ``mcp-vlm``; ``large`` (about 6 B
parameters, a 70B-class layer's width, 8 layers), ``tp-small`` and ``tp-tiny`` (for tests; every
size divides by 2 and by the uneven split 3:1) are text only, served as ``tp-lm``; ``trap`` (the
traps' 8-layer text model) as ``trap-lm``. ``--config`` sets any key over the preset.

- ``POST /v1/chat/completions`` (streamed SSE with a usage chunk, or one JSON body): content as a
  string or as parts, ``text`` and ``image_url`` with ``data:`` URLs of base64 PNG or JPEG (Pillow
  where installed; without it PNG through a small zlib decoder, JPEG refused); ``/v1/completions``
  takes a text prompt. One word is one token (hashed into the vocabulary); an image is
  ``image_tokens`` tokens. Decoding is greedy and never stops before ``max_tokens``, so the same
  request gives the same answer at rest and under load. ``"debug_hidden": true`` in a non-streamed
  request also returns ``token_ids`` and the final normalised hidden state of the prompt's last
  position (the same on every rank: for checking the split against the unsplit model).
- The engine admits waiting requests while a KV slot is free (``--max-batch``) and the step's
  prefill budget allows, prefills them together (images through the encoder in one batch), then
  runs one decode step for every running sequence; finished sequences give their slot back at
  once. The KV cache is one tensor allocated at start (``max_batch * max_seq`` tokens), as vLLM
  reserves its cache; activations come and go through PyTorch's caching allocator.
- ``--tensor-parallel N`` (N > 1): N ranks, one process per GPU (NCCL; gloo on a CPU), split
  Megatron-style: each rank holds a slice of the attention heads (QKV column-parallel, the output
  projection row-parallel) and of the MLP's hidden columns (up column-parallel, down row-parallel);
  the residual stream is all-reduced after each row-parallel layer, and the LM head is split over
  the vocabulary (each rank's best token is all-gathered). Rank 0 runs the engine and sends every
  step's plan to the other ranks over a gloo group on the CPU, so the control traffic never shows
  up as a collective kernel on the GPUs. The HTTP side is the launching process, which holds no
  model and hands requests to rank 0 through a queue (see :class:`Engine` for why). Images are
  not served there (the encoder is not split). Trap 5's knobs: ``--split balanced|uneven`` (the
  last rank gets ``--uneven-factor`` times the share of each other rank, so its peers wait for it
  inside every all-reduce); ``--allreduce overlapped`` (collectives queued without a host
  synchronisation, and a row-parallel product of at least ``--overlap-min-rows`` token rows cut in
  two halves whose all-reduces run under the other half's product) or ``serialised`` (before every
  collective the rank waits for its device to drain and then for every peer). NVLink multicast
  stays off: ``NCCL_NVLS_ENABLE=0`` (and PyTorch's and NVSHMEM's equivalents) are forced before any
  rank starts, whatever the caller's environment says. With N = 1 the engine is a thread of the
  HTTP process and there are no collectives.
- Trap 12: ``--compile shapes``: the prefill goes through ``torch.compile(dynamic=False)`` and every
  new prompt shape compiles on its first request (the recompile avalanche); ``--compile buckets
  --buckets 16,64,128,256``: prompts are padded to the next bucket and every bucket is compiled
  before the server listens (the fix), on the serving thread or (``--warmup-thread main``) on
  the main thread; decoding stays eager. The traps run it with ``--max-batch 1``, one request at a
  time, so the batch never adds a shape. Trap 10: ``--route URL,URL --weights 8,1`` makes this
  process a front (no model) that spreads requests over instances (each one this server, in its
  own process) by fixed weights; uneven weights starve an instance. Its ``/metrics`` joins the
  instances' own, each series labelled with its instance.
- ``--profile DIR`` writes one PyTorch profiler Chrome trace per rank (``tp_rank<R>.trace.json``)
  for ``--profile-steps`` steps, taken once the running batch first reaches
  ``--profile-at-batch``; on CUDA the collectives appear as kernels named
  ``ncclDevKernel_AllReduce_...`` / ``..._AllGather_...``, each step as ``ProfilerStep#N`` on the
  GPU timeline. ``../multi_gpu/merge_traces.py`` joins the ranks' traces.
- ``GET /metrics``: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (tokens held over the cache's tokens), ``vllm:num_preemptions_total``
  (always 0: nothing is preempted), ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
  histograms ``vllm:time_to_first_token_seconds``, ``vllm:e2e_request_latency_seconds``,
  ``vllm:request_queue_time_seconds``; with one rank ``nv_gpu_memory_used_bytes`` /
  ``nv_gpu_memory_total_bytes`` (NVML, else ``torch.cuda.mem_get_info``) and the allocator's
  allocated / reserved / peak bytes; ``process_resident_memory_bytes``, step and image counters;
  per rank ``mcp_tp_rank_step_seconds_total``, ``mcp_tp_rank_collective_seconds_total`` (time the
  rank's compute stream waited on collectives: CUDA events on a GPU, wall clock on a CPU),
  ``mcp_tp_rank_collective_share`` and the shard sizes; ``mcp_gpu_server_instance_busy_seconds_total``
  (rank 0's step time, labelled ``--instance``) and, when compiling,
  ``mcp_gpu_server_compiles_total`` (graphs TorchDynamo compiled).
- ``GET /debug/memory_snapshot`` (one rank): ``torch.cuda.memory_snapshot()`` reduced to its
  segments (``total_size``, ``allocated_size``, ``blocks`` of ``size`` and ``state``), the input of
  ``mcp-bench forensics --snapshot``. ``GET /debug/info``: config, shards, versions.

    python3 measurements/gpu_model_server/server.py --port 8000            # CUDA, preset "small"
    python3 measurements/gpu_model_server/server.py --device cpu --preset tiny --max-batch 8
    python3 measurements/gpu_model_server/server.py --tensor-parallel 2 --preset large --split uneven
    python3 measurements/gpu_model_server/server.py --preset trap --max-batch 1 --compile shapes
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import bisect
import io
import itertools
import json
import multiprocessing as mp
import os
import queue
import socket
import struct
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

PRESETS: dict[str, dict[str, Any]] = {
    # about 250 M parameters: big enough that a decode step of 256 sequences is real GPU work,
    # small enough to build in seconds from random weights
    "small": {
        "model": "mcp-vlm",
        "vocab": 32000,
        "d_model": 1024,
        "layers": 12,
        "heads": 16,
        "ff": 4096,
        "max_seq": 1024,
        "vision": {"image_size": 224, "patch": 16, "pool": 2, "d": 768, "layers": 4, "heads": 12, "ff": 3072},
    },
    # for tests on a CPU
    "tiny": {
        "model": "mcp-vlm",
        "vocab": 4096,
        "d_model": 64,
        "layers": 2,
        "heads": 4,
        "ff": 128,
        "max_seq": 256,
        "vision": {"image_size": 32, "patch": 8, "pool": 2, "d": 32, "layers": 1, "heads": 2, "ff": 64},
        "dtype": "float32",
    },
    # tensor-parallel tests on a CPU: every size divides by 2 and by the uneven split 3:1
    "tp-tiny": {
        "model": "tp-lm",
        "vocab": 512,
        "d_model": 64,
        "layers": 2,
        "heads": 8,
        "ff": 256,
        "max_seq": 128,
        "dtype": "float32",
    },
    # about 0.5 B parameters: a decode step's products are small against its collectives
    "tp-small": {
        "model": "tp-lm",
        "vocab": 32000,
        "d_model": 2048,
        "layers": 8,
        "heads": 16,
        "ff": 8192,
        "max_seq": 1024,
    },
    # about 6 B parameters (a 70B-class layer's width, 8 layers): with two ranks each reads about
    # 0.74 GB of weights per layer and decode step (~0.17 ms on an H200), several times the two
    # all-reduces of a [batch, 8192] activation that the layer needs
    "large": {
        "model": "tp-lm",
        "vocab": 32000,
        "d_model": 8192,
        "layers": 8,
        "heads": 64,
        "ff": 28672,
        "max_seq": 1024,
    },
    # the traps' model (10, 12): 8 layers of the small preset's width, no image encoder
    "trap": {
        "model": "trap-lm",
        "vocab": 32000,
        "d_model": 1024,
        "layers": 8,
        "heads": 16,
        "ff": 4096,
        "max_seq": 1024,
    },
}
DEFAULTS = {"dtype": "bfloat16", "seed": 0}


def preset(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(json.dumps({**DEFAULTS, **PRESETS[name]}))
    return config


def load_config(name: str, overrides: str | None = None) -> dict[str, Any]:
    """A preset, with a JSON object's keys over it (``vision`` merged key by key)."""
    config = preset(name)
    if overrides:
        extra = json.loads(overrides)
        vision = {**config.get("vision", {}), **extra.pop("vision", {})}
        config.update(extra)
        if vision:
            config["vision"] = vision
    v = config.get("vision", {"image_size": 1, "patch": 1, "pool": 1})
    if v["image_size"] % (v["patch"] * v["pool"]) or config["d_model"] % config["heads"]:
        raise SystemExit("config: image_size must divide by patch*pool, d_model by heads")
    return config


def image_tokens(config: dict[str, Any]) -> int:
    """Tokens one image becomes: the patch grid, average-pooled ``pool`` by ``pool``."""
    v = config["vision"]
    side = v["image_size"] // v["patch"] // v["pool"]
    return side * side


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


def _generator(config: dict[str, Any], offset: int, device: str) -> Callable[..., Any]:
    """``rnd(*shape)``: normal numbers * 0.02 in the config's dtype from the seed plus ``offset``."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(int(config["seed"]) * 1009 + offset)
    dtype = getattr(torch, config["dtype"])

    def rnd(*shape: int) -> Any:
        return torch.randn(*shape, generator=g, device=device, dtype=dtype) * 0.02

    return rnd


def global_weights(config: dict[str, Any], device: str) -> dict[str, Any]:
    """Embeddings and LM head of the whole model (the same on every rank and for the reference)."""
    rnd = _generator(config, 0, device)
    d, v = config["d_model"], config["vocab"]
    return {"emb": rnd(v, d), "pos": rnd(config["max_seq"], d), "head": rnd(v, d)}


def layer_weights(config: dict[str, Any], layer: int, device: str) -> dict[str, Any]:
    """One layer's full weights from a per-layer seed: ``qkv [3, heads, head_dim, d]``,
    ``o [d, d]``, ``up [ff, d]``, ``down [d, ff]``. Each rank draws them all and keeps its slice,
    so the split model and the unsplit one hold exactly the same numbers."""
    rnd = _generator(config, layer + 1, device)
    d, h, ff = config["d_model"], config["heads"], config["ff"]
    return {"qkv": rnd(3, h, d // h, d), "o": rnd(d, d), "up": rnd(ff, d), "down": rnd(d, ff)}


# --------------------------------------------------------------------------- images


class ImageError(ValueError):
    """An image part the server cannot use; answered 400 (415 for a format it cannot decode)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """A minimal PNG decoder for hosts without Pillow: 8-bit grey, RGB or RGBA, not interlaced.
    Returns (width, height, channels, pixel bytes). Filter 0 and 2 rows cost little; 1, 3 and 4
    are undone byte by byte (correct, slow: Pillow is the normal path)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ImageError("not a PNG")
    pos, idat, header = 8, bytearray(), None
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if header is None:
        raise ImageError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace != 0:
        raise ImageError(
            f"PNG of depth {depth}, colour type {colour}, interlace {interlace}: unsupported", 415
        )
    try:
        raw = zlib.decompress(bytes(idat))
    except zlib.error as exc:
        raise ImageError(f"PNG data: {exc}") from exc
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise ImageError("PNG data has the wrong length")
    out = bytearray(height * stride)
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        row = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 2:
            row = bytearray((a + b) & 0xFF for a, b in zip(row, prev, strict=True))
        elif kind in (1, 3, 4):
            for i in range(stride):
                left = row[i - channels] if i >= channels else 0
                up = prev[i]
                ul = prev[i - channels] if i >= channels else 0
                pred = left if kind == 1 else (left + up) // 2 if kind == 3 else _paeth(left, up, ul)
                row[i] = (row[i] + pred) & 0xFF
        elif kind != 0:
            raise ImageError(f"PNG filter {kind}")
        out[y * stride : (y + 1) * stride] = row
        prev = row
    return width, height, channels, bytes(out)


def _pillow() -> Any | None:
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def decode_image(url: str, use_pillow: bool = True) -> Any:
    """A ``data:`` URL to a uint8 tensor ``[3, H, W]`` (RGB)."""
    import numpy as np
    import torch

    if not url.startswith("data:"):
        raise ImageError("only data: URLs are served (this server fetches nothing)")
    meta, sep, payload = url[5:].partition(",")
    if not sep or not meta.endswith(";base64"):
        raise ImageError("image_url must be a base64 data: URL")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"bad base64: {exc}") from exc
    pil = _pillow() if use_pillow else None
    if pil is not None:
        try:
            with pil.open(io.BytesIO(data)) as im:
                arr = np.array(im.convert("RGB"))  # a writable copy, as torch.from_numpy wants
        except (OSError, ValueError) as exc:
            raise ImageError(f"image: {exc}") from exc
    elif data[:8] == b"\x89PNG\r\n\x1a\n":
        w, h, c, pixels = decode_png(data)
        arr = np.frombuffer(pixels, dtype=np.uint8).reshape(h, w, c)
        arr = np.repeat(arr, 3, axis=2) if c == 1 else arr[:, :, :3]
    else:
        raise ImageError("no Pillow on this host: only PNG can be decoded", 415)
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).contiguous()


def build_vision(config: dict[str, Any], device: str) -> Any:
    """The image encoder (patches, bidirectional attention, a projection to ``d_model``) with
    random weights from ``config['seed']``; it is never split over ranks."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    v, d_model = config["vision"], config["d_model"]

    class EncoderBlock(nn.Module):
        def __init__(self, d: int, heads: int, ff: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.up = nn.Linear(d, ff, bias=False)
            self.down = nn.Linear(ff, d, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            qkv = self.qkv(F.rms_norm(x, (d,))).view(b, t, 3, self.heads, d // self.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(F.rms_norm(x, (d,)))))

    class VisionEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.size, self.pool = v["image_size"], v["pool"]
            grid = v["image_size"] // v["patch"] // v["pool"]
            self.patch = nn.Conv2d(3, v["d"], kernel_size=v["patch"], stride=v["patch"])
            self.pos = nn.Parameter(torch.randn(grid * grid, v["d"]) * 0.02)
            self.blocks = nn.ModuleList(EncoderBlock(v["d"], v["heads"], v["ff"]) for _ in range(v["layers"]))
            self.proj = nn.Linear(v["d"], d_model, bias=False)

        def forward(self, images: list[torch.Tensor]) -> torch.Tensor:
            """uint8 ``[3, H, W]`` images of any size -> ``[N, image_tokens, d_model]``."""
            x = torch.stack(
                [
                    F.interpolate(im[None].float(), size=(self.size, self.size), mode="bilinear")[0]
                    for im in images
                ]
            )
            x = (x / 127.5 - 1.0).to(self.proj.weight.dtype)
            x = F.avg_pool2d(self.patch(x), self.pool)
            x = x.flatten(2).transpose(1, 2) + self.pos
            for blk in self.blocks:
                x = blk(x)
            return self.proj(F.rms_norm(x, (x.shape[-1],)))

    torch.manual_seed(int(config["seed"]))
    enc = VisionEncoder()
    for p in enc.parameters():  # random weights kept small, so activations stay finite in bf16
        if p.dim() >= 2:
            nn.init.normal_(p, std=0.02)
    return enc.to(device, getattr(torch, config["dtype"])).eval()


# --------------------------------------------------------------------------- one rank's shard


@dataclass
class Plan:
    """One engine step as every rank runs it: slot moves (compaction after releases), a prefill
    of right-padded prompts into slots ``first..first+P-1``, and, with ``decode``, a decode of
    slots ``0..first+P-1`` (the prefilled ones with the token their prefill chose). ``images``
    (one list per prompt) never travel: they are served with one rank only."""

    moves: list[tuple[int, int, int]] = field(default_factory=list)  # (dst, src, tokens)
    prefill: list[list[int]] = field(default_factory=list)
    first: int = 0
    decode_tokens: list[int] = field(default_factory=list)  # slots 0..first-1
    decode_positions: list[int] = field(default_factory=list)
    decode: bool = False
    profile: int = 0  # 1: start the profiler before this step
    stop: bool = False
    images: list[list[Any]] = field(default_factory=list)

    HEADER = 9

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
            int(self.decode),
            self.profile,
            len(payload),
        ]
        return header, payload

    @classmethod
    def decode_from(cls, header: list[int], payload: list[int]) -> Plan:
        stop, m, p, longest, first, n, decode, profile, _ = header
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
            decode=bool(decode),
            profile=profile,
            stop=bool(stop),
        )


class Collectives:
    """The data-plane collectives of one rank, timed: the time its compute stream waits on them.
    Without a group (one rank) each is the identity and nothing is timed."""

    def __init__(self, group: Any, mode: str, device: str, overlap_min_rows: int) -> None:
        import torch

        self.torch, self.group = torch, group
        self.mode, self.device, self.overlap_min_rows = mode, device, overlap_min_rows
        self.cuda = device.startswith("cuda")
        self.events: list[tuple[Any, Any]] = []
        self.cpu_s = 0.0
        if group is not None:
            import torch.distributed as dist

            self.dist = dist

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
        if self.group is None:
            return x
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
        if self.group is None or self.mode != "overlapped" or rows < max(2, self.overlap_min_rows):
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
        if self.group is None:
            return x[None]
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
    """One rank's slice of the model (all of it with one rank, the image encoder included), its
    slice of the KV cache, and its step."""

    def __init__(
        self, config: dict[str, Any], rank: int, args: argparse.Namespace, device: str, comm: Any
    ) -> None:
        import torch

        world = args.tensor_parallel
        self.torch, self.config, self.rank, self.world, self.device = torch, config, rank, world, device
        self.comm = comm
        d, h = config["d_model"], config["heads"]
        self.hd = d // h
        heads = split_sizes(h, world, args.split, args.uneven_factor)
        ffs = split_sizes(config["ff"], world, args.split, args.uneven_factor)
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
        self.vision = build_vision(config, device) if "vision" in config and world == 1 else None
        self.image_tokens = image_tokens(config) if self.vision is not None else 0
        dtype = getattr(torch, config["dtype"])
        # keys and values of every layer for every slot, reserved once (as vLLM reserves its cache)
        self.cache = torch.zeros(
            (2, config["layers"], args.max_batch, self.heads, config["max_seq"], self.hd),
            dtype=dtype,
            device=device,
        )
        self.parameters = sum(t.numel() for layer in self.layers for t in layer.values()) + self.head.numel()
        self.buckets = sorted(args.bucket_sizes) if args.compile == "buckets" else []
        self.prefill_core = self._prefill_core
        if args.compile != "off":
            import torch._dynamo

            cfg = torch._dynamo.config
            for name, value in (("recompile_limit", 64), ("cache_size_limit", 64)):
                if hasattr(cfg, name):
                    setattr(cfg, name, value)
            for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
                if hasattr(cfg, name):
                    setattr(cfg, name, 512)
            self.prefill_core = torch.compile(self._prefill_core, dynamic=False)

    def describe(self) -> list[int]:
        return [self.rank, self.heads, self.ff, self.head.shape[0], self.parameters]

    def total_parameters(self) -> int:
        """Every parameter of the model (with one rank; a rank's own with several)."""
        vision = sum(p.numel() for p in self.vision.parameters()) if self.vision is not None else 0
        return self.parameters + self.emb.numel() + self.pos.numel() + vision

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
        if self.world == 1:
            return F.linear(hn, self.head).argmax(-1), hn
        best, idx = F.linear(hn, self.head).float().max(-1)
        mine = torch.stack([best, (idx + self.vocab0).float()], -1)  # [B, 2]
        every = self.comm.all_gather(mine)  # [world, B, 2]
        pick = every[:, :, 0].argmax(0)  # first rank on a tie: the lowest index, as argmax does
        tokens = every[pick, torch.arange(h.shape[0], device=h.device), 1].long()
        return tokens, hn

    def _embed(self, prompts: list[list[int]], images: list[list[Any]]) -> tuple[Any, list[int]]:
        """Right-padded prompts ``[B, T, d]`` (each image's tokens first, then the text's; T padded
        to the next bucket when compiling by buckets) and each prompt's length."""
        torch, dev = self.torch, self.device
        images = images or [[] for _ in prompts]
        lengths = [len(p) + len(im) * self.image_tokens for p, im in zip(prompts, images, strict=True)]
        t = max(lengths)
        t = next((b for b in self.buckets if b >= t), t)
        if not any(images):
            ids = torch.tensor([p + [0] * (t - len(p)) for p in prompts], device=dev)
            return self.emb[ids] + self.pos[:t], lengths
        assert self.vision is not None
        vis = self.vision([im.to(dev, non_blocking=True) for row in images for im in row])
        x = torch.zeros((len(prompts), t, self.emb.shape[1]), dtype=self.emb.dtype, device=dev)
        k = 0
        for row, (p, ims) in enumerate(zip(prompts, images, strict=True)):
            at = 0
            for _ in ims:
                x[row, at : at + self.image_tokens] = vis[k]
                at += self.image_tokens
                k += 1
            if p:
                x[row, at : at + len(p)] = self.emb[torch.tensor(p, device=dev)]
        return x + self.pos[:t], lengths

    def _prefill_core(self, x: Any, last: Any, slots: Any) -> tuple[Any, Any]:
        """Right-padded prompts ``x [B, T, d]`` (causal, so padding after a prompt is never
        attended); keys and values go to ``cache[:, layer, slot, :, :T]``. The next token of each."""
        F = self.torch.nn.functional
        b, t, _ = x.shape
        for i in range(len(self.layers)):
            q, k, v = self._attention_in(x, i)
            self.cache[0, i, slots, :, :t] = k
            self.cache[1, i, slots, :, :t] = v
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
            x = self._mlp(x + self.comm.row_parallel(a, self.layers[i]["o"]), i)
        return self._next_tokens(x[self.torch.arange(b, device=x.device), last])

    def decode(self, tokens: list[int], positions: list[int]) -> Any:
        """One token for each of the ``n`` running sequences, held in slots ``0..n-1``; attention
        reads ``cache[..., :span]`` only, ``span`` one past the longest position."""
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
        torch = self.torch
        for dst, src, n in plan.moves:
            self.cache[:, :, dst, :, :n] = self.cache[:, :, src, :, :n]
        first: list[int] = []
        lengths: list[int] = []
        hidden = None
        if plan.prefill:
            x, lengths = self._embed(plan.prefill, plan.images)
            last = torch.tensor([n - 1 for n in lengths], device=self.device)
            slots = torch.arange(plan.first, plan.first + len(lengths), device=self.device)
            toks, hidden = self.prefill_core(x, last, slots)
            first = toks.tolist()
        tokens, positions = plan.decode_tokens + first, plan.decode_positions + lengths
        nxt = self.decode(tokens, positions).tolist() if plan.decode and tokens else []
        return first, nxt, hidden


# --------------------------------------------------------------------------- a rank


class Rank:
    """What every rank runs: the process group (with several ranks), its shard, the per-step plan
    and statistics, and the profiler."""

    def __init__(self, args: argparse.Namespace, config: dict[str, Any], rank: int, port: int) -> None:
        os.environ.update(NO_MULTICAST)
        import torch

        self.torch, self.args, self.rank, self.world = torch, args, rank, args.tensor_parallel
        if args.threads:
            torch.set_num_threads(args.threads)
        cuda = args.device.startswith("cuda")
        self.device = f"cuda:{rank}" if cuda and self.world > 1 else args.device
        group = None
        if self.world > 1:
            import torch.distributed as dist

            self.dist = dist
            kw: dict[str, Any] = {}
            if cuda:
                torch.cuda.set_device(rank)
                kw["device_id"] = torch.device(self.device)
            dist.init_process_group(
                "nccl" if cuda else "gloo",
                init_method=f"tcp://127.0.0.1:{port}",
                rank=rank,
                world_size=self.world,
                timeout=timedelta(seconds=args.dist_timeout),
                **kw,
            )
            group = dist.group.WORLD
            self.ctrl = dist.new_group(backend="gloo")  # plans and statistics travel on the CPU
        self.comm = Collectives(group, args.allreduce, self.device, args.overlap_min_rows)
        with torch.inference_mode():
            self.shard = Shard(config, rank, args, self.device, self.comm)
        self.shards = self.gather_ints(self.shard.describe())
        self.profiler: Any = None
        self.profile_left = 0

    def describe(self) -> dict[str, Any]:
        """What the HTTP side shows in /debug/info and /metrics (rank 0's view)."""
        torch, cache = self.torch, self.shard.cache
        cuda = self.device.startswith("cuda")
        return {
            "shards": self.shards,
            "parameters": self.shard.total_parameters(),
            "kv_cache_bytes": cache.numel() * cache.element_size(),
            "torch": torch.__version__,
            "device_name": torch.cuda.get_device_name(self.device) if cuda else None,
        }

    def gather_ints(self, values: list[int]) -> list[list[int]]:
        if self.world == 1:
            return [values]
        t = self.torch.tensor(values, dtype=self.torch.int64)
        out = [self.torch.empty_like(t) for _ in range(self.world)]
        self.dist.all_gather(out, t, group=self.ctrl)
        return [o.tolist() for o in out]

    def broadcast_plan(self, plan: Plan | None) -> Plan:
        """Rank 0 sends its plan, every other rank receives it (one rank: nothing to send)."""
        if self.world == 1:
            assert plan is not None
            return plan
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
        return plan if plan is not None else Plan.decode_from(header.tolist(), payload.tolist())

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
        if self.world == 1:
            every = [[step_s, 0.0]]
        else:
            mine = torch.tensor([step_s, self.comm.take_seconds()], dtype=torch.float64)
            gathered = [torch.empty_like(mine) for _ in range(self.world)]
            self.dist.all_gather(gathered, mine, group=self.ctrl)
            every = [e.tolist() for e in gathered]
        if self.profiler is not None:
            self.profiler.step()
            self.profile_left -= 1
            if self.profile_left <= 0:
                self.profiler.stop()
                self.profiler = None
        return first, nxt, hidden, every

    def follow(self) -> None:
        """A rank other than 0: runs rank 0's plans until told to stop."""
        while True:
            plan = self.broadcast_plan(None)
            if plan.stop:
                break
            self.run_step(plan)
        self.close()

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
        if self.world > 1:
            self.dist.destroy_process_group()


def rank_main(
    args: argparse.Namespace, config: dict[str, Any], rank: int, port: int, inbox: Any, outbox: Any
) -> None:
    """Every rank's process (several ranks). Rank 0 runs the engine (fed by the HTTP process
    through ``inbox``, answering through ``outbox``); the others follow rank 0's plans until told
    to stop. A rank whose HTTP process is gone exits."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
    try:
        r = Rank(args, config, rank, port)
    except Exception as exc:
        if rank == 0:
            outbox.put(("failed", f"rank 0 did not start: {exc!r}"))
        raise
    if rank == 0:
        Engine(r, inbox, outbox).serve()
    else:
        r.follow()


# --------------------------------------------------------------------------- the engine


@dataclass
class Seq:
    """One request in the engine."""

    rid: str
    tokens: list[int]
    images: list[Any]
    max_tokens: int
    want_hidden: bool = False
    arrival: float = field(default_factory=time.perf_counter)
    prompt_len: int = 0
    pos: int = 0  # tokens in the cache
    last: int = 0
    generated: int = 0
    first_at: float | None = None
    cancelled: bool = False


class Engine:
    """Continuous batching on rank 0: admits waiting requests up to ``max_batch`` and the prefill
    budget, sends each step's plan to every rank, runs its own shard, and sends the step's tokens
    (with the figures /metrics shows) to the HTTP side in one message.

    With one rank it is a thread of the HTTP process (``outbox`` hands each message to the event
    loop). With several it is rank 0's main thread, and the HTTP side is another process: streaming
    a token to each of a hundred clients every few milliseconds is Python work that, in rank 0's
    process, would hold the interpreter lock while rank 0 should be launching its kernels; its
    peers would then wait for it in every all-reduce, a hidden wait made by the server rather than
    by the split under test."""

    def __init__(self, rank: Rank, inbox: Any, outbox: Any) -> None:
        self.rank, self.args, self.inbox, self.outbox = rank, rank.args, inbox, outbox
        self.image_tokens = rank.shard.image_tokens
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []  # running[i] holds slot i
        self.by_rid: dict[str, Seq] = {}
        self.moves: list[tuple[int, int, int]] = []
        self.stopping = False
        self.warmed = False
        self.profile_sent = False
        self.profile_armed = False  # set after the warm-up, so the trace shows served load
        self.reset()

    def reset(self) -> None:
        """Zero the counters (after the warm-up, so /metrics counts served requests)."""
        world = self.rank.world
        self.step_s, self.coll_s = [0.0] * world, [0.0] * world
        self.steps = self.prompt_tokens = self.generation_tokens = self.finished = 0
        self.images = self.errors = self.running_peak = 0
        self.step_seconds = 0.0
        self.obs: dict[str, list[float]] = {"ttft": [], "e2e": [], "queue": []}

    def stats(self) -> dict[str, Any]:
        return {
            "running": len(self.running),
            "waiting": len(self.waiting),
            "held": sum(s.pos for s in self.running),
            "steps": self.steps,
            "step_seconds": self.step_seconds,
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "finished": self.finished,
            "images": self.images,
            "running_peak": self.running_peak,
            "errors": self.errors,
            "step_s": list(self.step_s),
            "coll_s": list(self.coll_s),
        }

    def _take(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "submit":
            _, rid, ids, images, n, want_hidden, arrival = msg
            seq = Seq(rid, list(ids), list(images), int(n), bool(want_hidden), arrival)
            seq.prompt_len = len(seq.tokens) + len(seq.images) * self.image_tokens
            self.by_rid[rid] = seq
            self.waiting.append(seq)
        elif msg[0] == "cancel" and msg[1] in self.by_rid:
            self.by_rid[msg[1]].cancelled = True
        elif msg[0] == "stop":
            self.stopping = True

    def _drain(self, block: bool) -> None:
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
            if admitted and s.prompt_len > budget:
                break
            self.waiting.popleft()
            budget -= s.prompt_len
            admitted.append(s)
        now = time.perf_counter()
        self.obs["queue"] += [now - s.arrival for s in admitted]
        return admitted

    def warm_up(self) -> None:
        """Requests through every rank before serving, one at a time, so the first measured request
        pays no kernel selection, allocator growth or compile of its own: a text one, an image one
        (where there is an encoder) and, compiling by buckets, one of each bucket's length."""
        torch = self.rank.torch
        reqs: list[tuple[list[int], list[Any], int]] = [([1, 2, 3], [], 4)]
        if self.image_tokens:
            side = self.rank.shard.config["vision"]["image_size"]
            reqs.append(([4, 5], [torch.zeros((3, side, side), dtype=torch.uint8)], 4))
        reqs += [([0] * b, [], 1) for b in self.rank.shard.buckets]
        for i, (ids, images, n) in enumerate(reqs):
            self._take(("submit", f"warm-up-{i}", ids, images, n, False, time.perf_counter()))
            while self.waiting or self.running:
                self._step()
        self.reset()
        self.warmed = True
        self.profile_armed = bool(self.args.profile)

    def serve(self) -> None:
        """Warm up (unless done), say ready, run the step loop until told to stop."""
        try:
            if not self.warmed:
                self.warm_up()
            self.outbox.put(("ready", self.rank.describe()))
        except Exception as exc:
            import traceback

            traceback.print_exception(exc)
            self.outbox.put(("failed", f"the engine did not start: {exc!r}"))
            raise
        self.run()
        self.rank.close()

    def run(self) -> None:
        """The step loop, in the thread where the steps and the profiler run."""
        while True:
            self._drain(block=not self.waiting and not self.running)
            if self.stopping:
                if self.rank.world > 1:
                    self.rank.broadcast_plan(Plan(stop=True))
                return
            if self.waiting or self.running:
                self._step()

    def _step(self) -> None:
        admitted = self._admit()
        t0 = time.perf_counter()
        decode = any(s.generated < s.max_tokens for s in self.running) or any(
            s.max_tokens > 1 for s in admitted
        )
        plan = Plan(
            moves=self.moves,
            prefill=[s.tokens for s in admitted],
            images=[s.images for s in admitted] if any(s.images for s in admitted) else [],
            first=len(self.running),
            decode_tokens=[s.last for s in self.running] if decode else [],
            decode_positions=[s.pos for s in self.running] if decode else [],
            decode=decode,
        )
        self.moves = []
        batch = len(self.running) + len(admitted)
        if self.profile_armed and not self.profile_sent and batch >= self.args.profile_at_batch:
            plan.profile, self.profile_sent = 1, True
        try:
            self.rank.broadcast_plan(plan)
            first, nxt, hidden, stats = self.rank.run_step(plan)
        except Exception as exc:
            self._fail(admitted, exc)
            return
        for r, (step_s, coll_s) in enumerate(stats):
            self.step_s[r] += step_s
            self.coll_s[r] += coll_s
        self._emit(admitted, first, nxt, hidden)
        self.steps += 1
        self.step_seconds += time.perf_counter() - t0

    def _fail(self, admitted: list[Seq], exc: Exception) -> None:
        """One rank: a broken step fails its requests, never hangs them, and serving goes on.
        Several: a rank that fails a step cannot follow the next, so serving stops."""
        import traceback

        traceback.print_exception(exc)
        if self.rank.world > 1:
            self.outbox.put(("failed", f"a step failed on rank 0: {exc!r}"))
            time.sleep(1.0)  # let the queue's feeder thread send it
            os._exit(4)
        self.errors += 1
        victims = {s.rid: s for s in [*self.running, *admitted]}
        for rid in victims:
            self.by_rid.pop(rid, None)
        self.running, self.moves = [], []
        self.outbox.put(("tokens", [(rid, [(-1, True)], None) for rid in victims], self.stats(), {}))

    def _emit(self, admitted: list[Seq], first: list[int], nxt: list[int], hidden: Any) -> None:
        produced: list[tuple[Seq, int]] = []
        vecs: dict[str, list[float]] = {}
        for row, (s, tok) in enumerate(zip(admitted, first, strict=True)):
            s.pos, s.last, s.generated = s.prompt_len, tok, 1
            self.images += len(s.images)
            s.images = []  # the pixels are no longer needed
            self.prompt_tokens += s.prompt_len
            self.running.append(s)
            produced.append((s, tok))
            if s.want_hidden and hidden is not None:
                vecs[s.rid] = hidden[row].float().tolist()
        self.running_peak = max(self.running_peak, len(self.running))
        for s, tok in zip(self.running, nxt, strict=False):  # just prefilled ones too
            if s.generated < s.max_tokens and not s.cancelled:
                s.pos, s.last, s.generated = s.pos + 1, tok, s.generated + 1
                produced.append((s, tok))
        now = time.perf_counter()
        out: dict[str, list[tuple[int, bool]]] = {}
        # a sequence prefilled in this step has two tokens here: only the later one can finish it
        last = {s.rid: i for i, (s, _) in enumerate(produced)}
        for i, (s, tok) in enumerate(produced):
            self.generation_tokens += 1
            if s.first_at is None:
                s.first_at = now
                self.obs["ttft"].append(now - s.arrival)
            done = last[s.rid] == i and s.generated >= s.max_tokens
            if done:
                self.obs["e2e"].append(now - s.arrival)
                self.finished += 1
            out.setdefault(s.rid, []).append((tok, done))
        self._release()
        batches = [(rid, items, vecs.get(rid)) for rid, items in out.items()]
        obs, self.obs = self.obs, {"ttft": [], "e2e": [], "queue": []}
        self.outbox.put(("tokens", batches, self.stats(), obs))

    def _release(self) -> None:
        """Frees finished and abandoned slots, moving the last running sequence into each freed
        slot so the running ones stay in slots ``0..n-1`` (every rank applies the same moves to its
        cache before the next step)."""
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


# --------------------------------------------------------------------------- metrics


class Histogram:
    """A Prometheus histogram with fixed buckets."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name, self.help, self.buckets = name, help_text, list(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self.lock:
            self.counts[bisect.bisect_left(self.buckets, value)] += 1
            self.sum += value

    def render(self, labels: str) -> str:
        with self.lock:
            counts, total = list(self.counts), self.sum
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        running = 0
        for le, c in zip([*map(repr, self.buckets), "+Inf"], counts, strict=True):
            running += c
            lines.append(f'{self.name}_bucket{{{labels},le="{le}"}} {running}')
        lines.append(f"{self.name}_sum{{{labels}}} {total!r}")
        lines.append(f"{self.name}_count{{{labels}}} {running}")
        return "\n".join(lines) + "\n"


LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
LATENCY_BUCKETS += (2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)


def _process_rss() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            return float(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class GpuMemory:
    """Device memory used and total: NVML for the whole GPU (what nvidia-smi and the forensics'
    telemetry read), else the CUDA runtime's free/total; None off the GPU.

    NVML's version 2 memory info, as mcp-bench's sampler and nvidia-smi read it: version 1 counts
    the driver's own reservation as used (615 MiB on an H200), so the two gauges of one GPU would
    disagree by that much."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.handle: Any = None
        self.nvml: Any = None
        if not device.startswith("cuda"):
            return
        try:
            import pynvml
            import torch

            pynvml.nvmlInit()
            index = torch.cuda.current_device() if device == "cuda" else int(device.split(":")[1])
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.nvml = pynvml
        except Exception:  # no NVML: the runtime's figure below
            self.handle = None

    def read(self) -> tuple[float, float] | None:
        if not self.device.startswith("cuda"):
            return None
        if self.handle is not None:
            v2 = getattr(self.nvml, "nvmlMemory_v2", None)
            try:
                info = self.nvml.nvmlDeviceGetMemoryInfo(self.handle, version=v2)
            except (TypeError, self.nvml.NVMLError):  # an older binding or driver: version 1
                info = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
            return float(info.used), float(info.total)
        import torch

        free, total = torch.cuda.mem_get_info()
        return float(total - free), float(total)


# --------------------------------------------------------------------------- HTTP


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def word(tok: int) -> str:
    return f" w{tok}"


def tokenize(text: str, vocab: int) -> list[int]:
    return [zlib.crc32(w.encode()) % vocab for w in text.split()]


def models_response(name: str) -> web.Response:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "mcp-gpu-model-server"}]
    return web.json_response({"object": "list", "data": data})


async def health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_app(start: Callable[..., Any], stop: Callable[..., Any], routes: list[Any]) -> web.Application:
    """The server's and the front's application: their start and stop, their routes and /health."""
    app = web.Application(client_max_size=64 * 2**20)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.add_routes([*routes, web.get("/health", health)])
    return app


class EngineFailed(RuntimeError):
    pass


class LoopOutbox:
    """The engine's outbox with one rank: each message is handed to the event loop (dropped
    before the server starts, as the warm-up's are)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.dispatch: Callable[[tuple[Any, ...]], None] | None = None

    def put(self, msg: tuple[Any, ...]) -> None:
        if self.loop is not None and self.dispatch is not None:
            self.loop.call_soon_threadsafe(self.dispatch, msg)


class Server:
    """The HTTP side: parses requests, decodes images off the event loop, hands requests to the
    engine (a thread here with one rank, rank 0's process with several) and streams tokens back."""

    def __init__(self, args: argparse.Namespace, config: dict[str, Any]) -> None:
        self.args, self.config, self.world = args, config, args.tensor_parallel
        self.model_name: str = config["model"]
        self.image_tokens = image_tokens(config) if "vision" in config and self.world == 1 else 0
        self.stats: dict[str, Any] = {}
        self.ranks: dict[str, Any] = {"shards": []}
        self.pending: dict[str, asyncio.Queue[tuple[list[tuple[int, bool]], list[float] | None]]] = {}
        self.failed: str | None = None
        self.up = False
        self.bad_requests = 0
        self.closing = threading.Event()
        self.hist = {
            "ttft": Histogram("vllm:time_to_first_token_seconds", "Arrival to first token.", LATENCY_BUCKETS),
            "e2e": Histogram("vllm:e2e_request_latency_seconds", "Arrival to last token.", LATENCY_BUCKETS),
            "queue": Histogram(
                "vllm:request_queue_time_seconds", "Arrival to admission into the batch.", LATENCY_BUCKETS
            ),
        }
        self.pool = ThreadPoolExecutor(max_workers=args.decode_threads, thread_name_prefix="image")
        self.use_pillow = args.image_decoder == "pillow" or (
            args.image_decoder == "auto" and _pillow() is not None
        )
        self.procs: list[Any] = []
        self.thread: threading.Thread | None = None
        self.torch: Any = None
        if self.world == 1:
            self.memory = GpuMemory(args.device)
            self.inbox: Any = queue.Queue()
            self.outbox: Any = LoopOutbox()
            rank = Rank(args, config, 0, 0)
            self.torch = rank.torch
            engine = Engine(rank, self.inbox, self.outbox)
            if args.warmup_thread == "main":
                engine.warm_up()
            self.thread = threading.Thread(target=engine.serve, name="engine", daemon=True)
        else:
            self.memory = GpuMemory("cpu")  # the HTTP process holds no GPU
            port = args.dist_port or _free_port()
            ctx = mp.get_context("spawn")
            self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
            self.procs = [
                ctx.Process(
                    target=rank_main, args=(args, config, r, port, self.inbox, self.outbox), name=f"rank{r}"
                )
                for r in range(self.world)
            ]
            for proc in self.procs:
                proc.daemon = True
                proc.start()

    async def start(self, app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[dict[str, Any]] = loop.create_future()
        if self.thread is not None:
            self.outbox.loop, self.outbox.dispatch = loop, self._dispatch
            self.thread.start()
        else:
            threading.Thread(target=self._read, args=(loop,), name="outbox", daemon=True).start()
        self.ranks = await self.ready
        print(json.dumps({"event": "ranks up", "shards": self.ranks["shards"]}), flush=True)

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        """Several ranks: rank 0's messages to the event loop; a rank that dies or a start that
        takes too long fails the start."""
        deadline = time.monotonic() + self.args.start_timeout
        while not self.closing.is_set():
            try:
                msg = self.outbox.get(timeout=0.5)
            except queue.Empty:
                if self.up:
                    continue
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead:
                    msg = ("failed", f"rank processes exited before serving: {dead}")
                elif time.monotonic() > deadline:
                    msg = ("failed", f"the ranks were not ready within {self.args.start_timeout} s")
                else:
                    continue
            except (EOFError, OSError):
                return
            self.up = self.up or msg[0] == "ready"
            loop.call_soon_threadsafe(self._dispatch, msg)
            if msg[0] == "failed" and not self.up:
                return

    def _dispatch(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "ready":
            self.up = True
            if not self.ready.done():
                self.ready.set_result(msg[1])
        elif msg[0] == "failed":
            self.failed = str(msg[1])
            if not self.ready.done():
                self.ready.set_exception(EngineFailed(self.failed))
            for q in self.pending.values():
                q.put_nowait(([(-1, True)], None))
        elif msg[0] == "tokens" and self.ready.done():  # the warm-up's are not served
            _, batches, stats, obs = msg
            for rid, items, vec in batches:
                q = self.pending.get(rid)
                if q is not None:
                    q.put_nowait((items, vec))
            self.stats = stats
            for key, values in obs.items():
                for v in values:
                    self.hist[key].observe(v)

    async def stop(self, app: web.Application) -> None:
        self.inbox.put(("stop",))
        loop = asyncio.get_running_loop()
        for p in self.procs:
            await loop.run_in_executor(None, p.join, 60)
            if p.is_alive():
                p.terminate()
        if self.thread is not None and self.thread.is_alive():
            await loop.run_in_executor(None, self.thread.join, 30)
        self.closing.set()
        self.pool.shutdown(wait=False)

    def parse(self, body: dict[str, Any], chat: bool) -> tuple[str, list[str], int]:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ImageError("messages must be a non-empty list")
            texts, urls = [], []
            for m in messages:
                content = m.get("content") if isinstance(m, dict) else None
                if isinstance(content, str):
                    texts.append(content)
                elif isinstance(content, list):
                    for part in content:
                        kind = part.get("type") if isinstance(part, dict) else None
                        if kind == "text":
                            texts.append(str(part.get("text", "")))
                        elif kind == "image_url":
                            iu = part.get("image_url")
                            url = iu.get("url") if isinstance(iu, dict) else iu
                            if not isinstance(url, str):
                                raise ImageError("image_url part without a url")
                            urls.append(url)
                        else:
                            raise ImageError(f"content part of type {kind!r} is not served")
                else:
                    raise ImageError("message content must be a string or a list of parts")
            text = " ".join(texts)
        else:
            prompt = body.get("prompt", "")
            text = " ".join(map(str, prompt)) if isinstance(prompt, list) else str(prompt)
            urls = []
        n = body.get("max_completion_tokens", body.get("max_tokens")) or 16
        if not isinstance(n, int) or n < 1:
            raise ImageError("max_tokens must be a positive integer")
        if urls and not self.image_tokens:
            raise ImageError("no image encoder here (a text-only preset, or --tensor-parallel above 1)")
        return text, urls, n

    def _refuse(self, message: str, status: int = 400) -> web.Response:
        if status < 500:
            self.bad_requests += 1
        return web.json_response(
            {"error": {"message": message, "type": "invalid_request_error"}}, status=status
        )

    async def generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = time.perf_counter()
        if self.failed:
            return web.json_response({"error": {"message": self.failed}}, status=503)
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ImageError("the body must be a JSON object")
            text, urls, n = self.parse(body, chat)
            loop = asyncio.get_running_loop()
            images = list(
                await asyncio.gather(
                    *(loop.run_in_executor(self.pool, decode_image, u, self.use_pillow) for u in urls)
                )
            )
        except (ImageError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            return self._refuse(str(exc), exc.status if isinstance(exc, ImageError) else 400)
        tokens = tokenize(text, self.config["vocab"]) or [0]
        prompt_len = len(tokens) + len(images) * self.image_tokens
        if prompt_len + n > self.config["max_seq"]:
            limit = self.config["max_seq"]
            return self._refuse(
                f"prompt ({prompt_len} tokens) + max_tokens ({n}) exceeds the model's {limit}"
            )
        want_hidden = bool(body.get("debug_hidden")) and not body.get("stream")
        key = uuid.uuid4().hex
        q: asyncio.Queue[tuple[list[tuple[int, bool]], list[float] | None]] = asyncio.Queue()
        self.pending[key] = q
        self.inbox.put(("submit", key, tokens, images, n, want_hidden, arrival))
        rid = ("chatcmpl-" if chat else "cmpl-") + key
        created = int(time.time())
        kind = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": prompt_len, "completion_tokens": n, "total_tokens": prompt_len + n}
        got = 0
        try:
            if not body.get("stream"):
                out: list[int] = []
                hidden = None
                while len(out) < n:
                    items, vec = await q.get()
                    if items[-1][0] < 0:
                        return web.json_response({"error": {"message": "the engine failed"}}, status=500)
                    out += [t for t, _ in items]
                    got, hidden = len(out), hidden or vec
                text_out = "".join(word(t) for t in out)
                choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text_out}
                else:
                    choice["text"] = text_out
                    choice["logprobs"] = None
                doc: dict[str, Any] = {
                    "id": rid,
                    "object": kind,
                    "created": created,
                    "model": self.model_name,
                    "choices": [choice],
                    "usage": usage,
                }
                if want_hidden:
                    doc["token_ids"], doc["hidden"] = out, hidden
                return web.json_response(doc)
            resp = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await resp.prepare(request)
            chunk_kind = kind + ".chunk" if chat else kind
            head = (
                f'data: {{"id":"{rid}","object":"{chunk_kind}","created":{created},'
                f'"model":"{self.model_name}","choices":['
            )
            while got < n:
                items = (await q.get())[0]
                while not q.empty():  # behind the engine: what is ready goes in one write
                    items += q.get_nowait()[0]
                if items[-1][0] < 0:  # the engine failed: the stream ends without [DONE]
                    await resp.write_eof()
                    return resp
                parts = []
                for tok, done in items:
                    got += 1
                    # the chunk as text around a template: json.dumps per token would be most of
                    # the event loop's work at 256 streams (a word " w123" needs no escaping)
                    finish = '"length"' if done else "null"
                    if chat:
                        role = '"role":"assistant",' if got == 1 else ""
                        body_ = f'"delta":{{{role}"content":"{word(tok)}"}}'
                    else:
                        body_ = f'"text":"{word(tok)}","logprobs":null'
                    parts.append(f'{head}{{"index":0,{body_},"finish_reason":{finish}}}]}}\n\n')
                await resp.write("".join(parts).encode())
            opts = body.get("stream_options")
            if isinstance(opts, dict) and opts.get("include_usage"):
                await resp.write(
                    _sse(
                        {
                            "id": rid,
                            "object": chunk_kind,
                            "created": created,
                            "model": self.model_name,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                )
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            self.pending.pop(key, None)
            if got < n:  # the client went away: the engine drops it at its next step
                self.inbox.put(("cancel", key))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, chat=False)

    async def metrics(self, request: web.Request) -> web.Response:
        st, a = self.stats, self.args
        lab = f'model_name="{self.model_name}"'
        out: list[str] = []

        def family(
            name: str, help_text: str, rows: list[tuple[str, float | None]], kind: str = "gauge"
        ) -> None:
            rows = [(labels, v) for labels, v in rows if v is not None]
            if rows:
                out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
                out.extend(f"{name}{{{labels}}} {float(v)!r}\n" for labels, v in rows)

        def gauge(
            name: str, value: float | None, help_text: str, labels: str = lab, kind: str = "gauge"
        ) -> None:
            family(name, help_text, [(labels, value)], kind)

        def counter(name: str, key: str, help_text: str, labels: str = lab) -> None:
            family(name, help_text, [(labels, st.get(key, 0))], "counter")

        gauge("vllm:num_requests_running", st.get("running", 0), "Sequences in the batch.")
        gauge("vllm:num_requests_waiting", st.get("waiting", 0), "Requests waiting for a slot.")
        kv = st.get("held", 0) / (a.max_batch * self.config["max_seq"])
        gauge("vllm:kv_cache_usage_perc", kv, "Tokens held over the cache's tokens.")
        gauge("vllm:num_preemptions_total", 0, "Preemptions (this engine never preempts).", kind="counter")
        counter("vllm:prompt_tokens_total", "prompt_tokens", "Prompt tokens prefilled.")
        counter("vllm:generation_tokens_total", "generation_tokens", "Tokens generated.")
        counter("vllm:request_success_total", "finished", "Requests finished.")
        out += [h.render(lab) for h in self.hist.values()]
        counter("mcp_gpu_model_server_steps_total", "steps", "Engine iterations.")
        counter("mcp_gpu_model_server_step_seconds_total", "step_seconds", "Wall time in engine iterations.")
        counter("mcp_gpu_model_server_images_total", "images", "Images encoded.")
        gauge(
            "mcp_gpu_model_server_running_peak",
            st.get("running_peak", 0),
            "Most sequences in one step so far.",
        )
        counter("mcp_gpu_model_server_engine_errors_total", "errors", "Engine steps that failed.")
        gauge("mcp_gpu_model_server_max_batch", a.max_batch, "KV-cache slots.")
        gauge(
            "mcp_gpu_model_server_bad_requests_total",
            self.bad_requests,
            "Requests answered 4xx.",
            kind="counter",
        )
        mem = self.memory.read()
        if mem is not None:
            g = 'gpu_uuid="0"'
            gauge("nv_gpu_memory_used_bytes", mem[0], "GPU memory used (the whole device).", g)
            gauge("nv_gpu_memory_total_bytes", mem[1], "GPU memory in all.", g)
            cuda = self.torch.cuda
            gauge(
                "mcp_gpu_model_server_torch_allocated_bytes",
                cuda.memory_allocated(),
                "Bytes in live tensors (PyTorch's caching allocator).",
            )
            gauge(
                "mcp_gpu_model_server_torch_reserved_bytes",
                cuda.memory_reserved(),
                "Bytes the caching allocator holds from the driver.",
            )
            gauge(
                "mcp_gpu_model_server_torch_max_allocated_bytes",
                cuda.max_memory_allocated(),
                "Peak bytes in live tensors since start.",
            )
        gauge("process_resident_memory_bytes", _process_rss(), "Resident memory of this process.", "")
        world = self.world
        step_s = st.get("step_s", [0.0] * world)
        coll_s = st.get("coll_s", [0.0] * world)
        rk = [f'rank="{r}"' for r in range(world)]
        gauge("mcp_tp_world_size", world, "Tensor-parallel ranks.", "")
        counter("mcp_tp_steps_total", "steps", "Engine steps run by every rank.", "")
        family(
            "mcp_tp_rank_step_seconds_total",
            "Device time of each rank's steps.",
            list(zip(rk, step_s, strict=True)),
            "counter",
        )
        family(
            "mcp_tp_rank_collective_seconds_total",
            "Time each rank's compute stream waited on collectives (all-reduce, all-gather, barriers).",
            list(zip(rk, coll_s, strict=True)),
            "counter",
        )
        share = [c / s if s > 0 else 0.0 for c, s in zip(coll_s, step_s, strict=True)]
        family(
            "mcp_tp_rank_collective_share",
            "Collective time over step time, since the start.",
            list(zip(rk, share, strict=True)),
        )
        for col, name, help_text in (
            (1, "mcp_tp_rank_heads", "Attention heads held by each rank."),
            (2, "mcp_tp_rank_ffn_columns", "MLP hidden columns held by each rank."),
            (4, "mcp_tp_rank_parameters", "Parameters held by each rank (layers and its LM-head slice)."),
        ):
            family(name, help_text, [(rk[row[0]], row[col]) for row in self.ranks["shards"]])
        inst = f'instance="{a.instance}"'
        gauge(
            "mcp_gpu_server_instance_busy_seconds_total",
            step_s[0],
            "Device time of this instance's steps (rank 0's).",
            inst,
            kind="counter",
        )
        if a.compile != "off":
            from torch._dynamo.utils import counters

            compiles = float(counters["stats"]["unique_graphs"])
            gauge(
                "mcp_gpu_server_compiles_total", compiles, "Graphs compiled by TorchDynamo.", inst, "counter"
            )
        text = "".join(out).replace("{}", "")
        return web.Response(text=text, content_type="text/plain")

    async def memory_snapshot(self, request: web.Request) -> web.Response:
        """The caching allocator's segments, reduced to what the fragmentation finding reads."""
        if not self.args.device.startswith("cuda") or self.torch is None:
            return web.json_response({"device": self.args.device, "segments": []})
        raw = await asyncio.get_running_loop().run_in_executor(None, self.torch.cuda.memory_snapshot)
        segments = [
            {
                "total_size": int(s["total_size"]),
                "allocated_size": int(s["allocated_size"]),
                "segment_type": s.get("segment_type"),
                "blocks": [{"size": int(b["size"]), "state": b["state"]} for b in s.get("blocks", [])],
            }
            for s in raw
        ]
        return web.json_response({"device": self.args.device, "taken": time.time(), "segments": segments})

    async def models(self, request: web.Request) -> web.Response:
        return models_response(self.model_name)

    async def info(self, request: web.Request) -> web.Response:
        a, r = self.args, self.ranks
        keys = ("rank", "heads", "ffn_columns", "vocab_rows", "parameters")
        return web.json_response(
            {
                "model": self.model_name,
                "config": self.config,
                "parameters": r.get("parameters"),
                "image_tokens": self.image_tokens,
                "max_batch": a.max_batch,
                "prefill_tokens": a.prefill_tokens,
                "device": a.device,
                "device_name": r.get("device_name"),
                "torch": r.get("torch"),
                "image_decoder": "pillow" if self.use_pillow else "png-zlib",
                "kv_cache_bytes": r.get("kv_cache_bytes"),
                "tensor_parallel": self.world,
                "split": a.split,
                "uneven_factor": a.uneven_factor,
                "allreduce": a.allreduce,
                "overlap_min_rows": a.overlap_min_rows,
                "compile": a.compile,
                "buckets": a.bucket_sizes if a.compile == "buckets" else None,
                "shards": [dict(zip(keys, s, strict=True)) for s in r["shards"]],
                "env": {k: os.environ.get(k) for k in NO_MULTICAST},
            }
        )

    def app(self) -> web.Application:
        routes = [web.post("/v1/chat/completions", self.chat), web.post("/v1/completions", self.completions)]
        routes += [web.get("/v1/models", self.models), web.get("/metrics", self.metrics)]
        routes += [web.get("/debug/memory_snapshot", self.memory_snapshot), web.get("/debug/info", self.info)]
        return make_app(self.start, self.stop, routes)


# --------------------------------------------------------------------------- the front (trap 10)


def _with_instance(line: str, instance: int) -> str:
    """A sample line with ``instance="N"`` added where it has no instance label."""
    series, _, value = line.rpartition(" ")
    if 'instance="' in series:
        return line
    if series.endswith("}"):
        return f'{series[:-1]},instance="{instance}"}} {value}'
    return f'{series}{{instance="{instance}"}} {value}'


def join_metrics(texts: list[str]) -> str:
    """The instances' Prometheus texts as one: each family's HELP and TYPE once, its samples from
    every instance, each labelled with its instance (the backend's index where it has no
    ``instance`` label of its own)."""
    heads: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for i, text in enumerate(texts):
        current = ""
        for line in text.splitlines():
            if line.startswith("#"):
                parts = line.split(maxsplit=3)
                if len(parts) >= 3:
                    current = parts[2]
                    head = heads.setdefault(current, [])
                    if line not in head:
                        head.append(line)
                continue
            if not line.strip():
                continue
            name = line.split("{", 1)[0].split(" ", 1)[0]
            fam = current if current and name.startswith(current) else name
            heads.setdefault(fam, [])
            samples.setdefault(fam, []).append(_with_instance(line, i))
    return "".join("".join(f"{x}\n" for x in heads[f] + samples.get(f, [])) for f in heads)


def route_app(backends: list[str], weights: list[int]) -> web.Application:
    """Weighted round robin over the instances (8,1: eight requests to the first, one to the second)."""
    order = itertools.cycle([i for i, w in enumerate(weights) for _ in range(w)])
    session: dict[str, ClientSession] = {}

    async def start(app: web.Application) -> None:
        session["s"] = ClientSession(timeout=ClientTimeout(total=600))

    async def stop(app: web.Application) -> None:
        await session["s"].close()

    async def forward(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        url = backends[next(order)] + request.path
        async with session["s"].post(url, data=raw, headers={"Content-Type": "application/json"}) as up:
            resp = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers["Content-Type"]})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    async def models(request: web.Request) -> web.Response:
        async with session["s"].get(backends[0] + "/v1/models") as r:
            return web.json_response(await r.json(), status=r.status)

    async def metrics(request: web.Request) -> web.Response:
        texts = []
        for b in backends:
            async with session["s"].get(b + "/metrics") as r:
                texts.append(await r.text())
        return web.Response(text=join_metrics(texts), content_type="text/plain")

    routes = [web.post("/v1/completions", forward), web.post("/v1/chat/completions", forward)]
    return make_app(start, stop, [*routes, web.get("/v1/models", models), web.get("/metrics", metrics)])


# --------------------------------------------------------------------------- the command line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--device", default="cuda", help="cuda, cuda:N (one rank) or cpu (tests; gloo)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small")
    p.add_argument("--config", help="JSON object of config keys over the preset")
    p.add_argument("--dtype", help="override the preset's dtype (float32, bfloat16)")
    p.add_argument("--layers", type=int, help="override the preset's decoder layers")
    p.add_argument("--max-batch", type=int, default=256, help="KV-cache slots: sequences decoded together")
    p.add_argument("--prefill-tokens", type=int, default=8192, help="prompt tokens admitted per step")
    p.add_argument("--decode-threads", type=int, default=8, help="threads decoding images")
    p.add_argument("--image-decoder", choices=("auto", "pillow", "png"), default="auto")
    p.add_argument(
        "--no-uvloop",
        dest="uvloop",
        action="store_false",
        help="asyncio's own loop even where uvloop is installed",
    )
    tp = p.add_argument_group("tensor parallelism (trap 5)")
    tp.add_argument(
        "--tensor-parallel",
        type=int,
        default=1,
        help="ranks: one process per GPU on CUDA, per CPU share on a CPU",
    )
    tp.add_argument("--split", choices=("balanced", "uneven"), default="balanced")
    tp.add_argument(
        "--uneven-factor", type=float, default=3.0, help="the last rank's weight against 1 for each other"
    )
    tp.add_argument("--allreduce", choices=("overlapped", "serialised"), default="overlapped")
    tp.add_argument(
        "--overlap-min-rows",
        type=int,
        default=512,
        help="token rows from which a row-parallel product is cut in two (prefill-sized: a decode "
        "batch's all-reduce is latency-bound, and cutting it would only double the latency)",
    )
    tp.add_argument(
        "--threads", type=int, help="CPU threads per rank (torch.set_num_threads; default: 2 with ranks)"
    )
    tp.add_argument("--dist-port", type=int, default=0, help="rendezvous port (0: a free one)")
    tp.add_argument("--dist-timeout", type=float, default=600.0)
    tp.add_argument("--start-timeout", type=float, default=900.0, help="seconds for the ranks to be ready")
    prof = p.add_argument_group("profiling")
    prof.add_argument("--profile", metavar="DIR", help="write a Chrome trace per rank here")
    prof.add_argument("--profile-steps", type=int, default=4)
    prof.add_argument(
        "--profile-at-batch", type=int, default=1, help="profile once the batch first holds this many"
    )
    traps = p.add_argument_group("traps 10 and 12")
    traps.add_argument("--compile", choices=("shapes", "buckets", "off"), default="off")
    traps.add_argument(
        "--buckets", default="16,64,128,256", help="prompt lengths compiled with --compile buckets"
    )
    traps.add_argument(
        "--warmup-thread",
        choices=("serving", "main"),
        default="serving",
        help="where the start-up compile and warm-up run (one rank): the serving thread, or the main thread",
    )
    traps.add_argument("--instance", default="0", help="label of this instance in /metrics")
    traps.add_argument("--route", help="front mode: comma-separated instance URLs (no model)")
    traps.add_argument("--weights", help="front mode: requests per instance in each round, e.g. 8,1")
    return p


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.route:
        backends = args.route.split(",")
        weights = [int(w) for w in (args.weights or ",".join("1" * len(backends))).split(",")]
        app = route_app(backends, weights)
    else:
        config = load_config(args.preset, args.config)
        config.update({k: v for k, v in (("dtype", args.dtype), ("layers", args.layers)) if v})
        args.bucket_sizes = [int(b) for b in args.buckets.split(",")]
        if args.tensor_parallel > 1 and (args.compile != "off" or args.device.startswith("cuda:")):
            parser.error("--tensor-parallel above 1 takes --device cuda or cpu, and no --compile")
        if args.compile == "buckets" and max(args.bucket_sizes) > config["max_seq"]:
            parser.error(f"a bucket is longer than the model's {config['max_seq']} positions")
        if args.tensor_parallel > 1 and args.threads is None:
            args.threads = 2
        os.environ.update(NO_MULTICAST)  # before any rank exists, so every process inherits it
        print(
            json.dumps({"event": "starting", "port": args.port, "tensor_parallel": args.tensor_parallel}),
            flush=True,
        )
        app = Server(args, config).app()

    async def announce(app: web.Application) -> None:
        print(json.dumps({"event": "listening", "port": args.port, "device": args.device}), flush=True)

    app.on_startup.append(announce)
    if args.uvloop:
        try:  # a faster event loop where installed: the streaming side is the server's busiest thread
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        except ImportError:
            pass
    web.run_app(app, host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
