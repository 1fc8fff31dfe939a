#!/usr/bin/env python3
"""A real GPU model server for the reference tables and the GPU-memory forensics: a small
vision-language transformer (a patch-embedding image encoder and a decoder-only transformer with a
KV cache), built from a config dict with random weights from a seed (nothing downloaded), batching
every running request into one forward step on the GPU (continuous batching), behind the OpenAI
chat endpoint and a vLLM-style ``/metrics``.

Why its own server rather than the reference server: the reference server models latency and
memory; this one spends them, so GPU memory peak %, SM utilisation, the allocator's
fragmentation and what a PyTorch server keeps after a level are the hardware's own figures.

- ``POST /v1/chat/completions`` (streamed SSE with a usage chunk, or one JSON body): content as a
  string or as parts, ``text`` and ``image_url`` with ``data:`` URLs of base64 PNG or JPEG (Pillow
  where installed; without it PNG through a small zlib decoder, JPEG refused). ``/v1/completions``
  takes a text prompt. One word is one token (hashed into the vocabulary); an image is
  ``image_tokens`` tokens. Decoding is greedy and never stops before ``max_tokens``, so the same
  request gives the same answer at rest and under load.
- The engine thread admits waiting requests while a KV slot is free (``--max-batch``) and the
  step's prefill budget allows, prefills them together (images through the encoder in one batch),
  then runs one decode step for every running sequence; finished sequences give their slot back
  at once. The KV cache is one tensor allocated at start (``max_batch * max_seq`` tokens), as vLLM
  reserves its cache; activations come and go through PyTorch's caching allocator.
- ``GET /metrics``: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (tokens held over the cache's tokens), ``vllm:num_preemptions_total``
  (always 0: nothing is preempted), ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``,
  histograms ``vllm:time_to_first_token_seconds``, ``vllm:e2e_request_latency_seconds``,
  ``vllm:request_queue_time_seconds``; ``nv_gpu_memory_used_bytes`` / ``nv_gpu_memory_total_bytes``
  (NVML, else ``torch.cuda.mem_get_info``), the allocator's allocated / reserved / peak bytes,
  ``process_resident_memory_bytes``, step and image counters.
- ``GET /debug/memory_snapshot``: ``torch.cuda.memory_snapshot()`` reduced to its segments
  (``total_size``, ``allocated_size``, ``blocks`` of ``size`` and ``state``), the input of
  ``mcp-bench forensics --snapshot``.

    python3 measurements/gpu_model_server/server.py --port 8000            # CUDA, preset "small"
    python3 measurements/gpu_model_server/server.py --device cpu --preset tiny --max-batch 8
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import bisect
import io
import json
import os
import struct
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

MODEL = "mcp-vlm"

PRESETS: dict[str, dict[str, Any]] = {
    # about 250 M parameters: big enough that a decode step of 256 sequences is real GPU work,
    # small enough to build in seconds from random weights
    "small": {
        "vocab": 32000,
        "d_model": 1024,
        "layers": 12,
        "heads": 16,
        "ff": 4096,
        "max_seq": 1024,
        "vision": {"image_size": 224, "patch": 16, "pool": 2, "d": 768, "layers": 4, "heads": 12, "ff": 3072},
        "dtype": "bfloat16",
        "seed": 0,
    },
    # for tests on a CPU
    "tiny": {
        "vocab": 4096,
        "d_model": 64,
        "layers": 2,
        "heads": 4,
        "ff": 128,
        "max_seq": 256,
        "vision": {"image_size": 32, "patch": 8, "pool": 2, "d": 32, "layers": 1, "heads": 2, "ff": 64},
        "dtype": "float32",
        "seed": 0,
    },
}


def image_tokens(config: dict[str, Any]) -> int:
    """Tokens one image becomes: the patch grid, average-pooled ``pool`` by ``pool``."""
    v = config["vision"]
    side = v["image_size"] // v["patch"] // v["pool"]
    return side * side


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


# --------------------------------------------------------------------------- the model


def build_model(config: dict[str, Any], device: str) -> Any:
    """The vision-language model with random weights from ``config['seed']``."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def attention_split(x: torch.Tensor, qkv: nn.Linear, heads: int) -> tuple[torch.Tensor, ...]:
        b, t, d = x.shape
        q, k, v = qkv(x).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
        return q, k, v

    class EncoderBlock(nn.Module):
        """Bidirectional attention over the image's patches."""

        def __init__(self, d: int, heads: int, ff: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.up = nn.Linear(d, ff, bias=False)
            self.down = nn.Linear(ff, d, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            q, k, v = attention_split(F.rms_norm(x, (d,)), self.qkv, self.heads)
            a = F.scaled_dot_product_attention(q, k, v)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(F.rms_norm(x, (d,)))))

    class VisionEncoder(nn.Module):
        def __init__(self, v: dict[str, Any], d_model: int) -> None:
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

    class DecoderBlock(nn.Module):
        def __init__(self, d: int, heads: int, ff: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.up = nn.Linear(d, ff, bias=False)
            self.down = nn.Linear(ff, d, bias=False)

        def mlp(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(F.gelu(self.up(F.rms_norm(x, (x.shape[-1],)))))

    class VLM(nn.Module):
        def __init__(self, c: dict[str, Any]) -> None:
            super().__init__()
            d = c["d_model"]
            self.heads, self.max_seq = c["heads"], c["max_seq"]
            self.emb = nn.Embedding(c["vocab"], d)
            self.pos = nn.Embedding(c["max_seq"], d)
            self.vision = VisionEncoder(c["vision"], d)
            self.blocks = nn.ModuleList(DecoderBlock(d, c["heads"], c["ff"]) for _ in range(c["layers"]))
            self.head = nn.Linear(d, c["vocab"], bias=False)

        def logits_argmax(self, h: torch.Tensor) -> torch.Tensor:
            return self.head(F.rms_norm(h, (h.shape[-1],))).argmax(-1)

        def prefill(
            self, x: torch.Tensor, lengths: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor
        ) -> torch.Tensor:
            """Right-padded prompts ``x [B, L, d]`` (causal, so padding after a prompt is never
            attended); keys and values go to ``cache[:, layer, slot, :, :L]``. The next token of each."""
            b, t, d = x.shape
            x = x + self.pos.weight[:t]
            for i, blk in enumerate(self.blocks):
                q, k, v = attention_split(F.rms_norm(x, (d,)), blk.qkv, self.heads)
                cache[0, i, slots, :, :t] = k
                cache[1, i, slots, :, :t] = v
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = blk.mlp(x + blk.o(a.transpose(1, 2).reshape(b, t, d)))
            last = x[torch.arange(b, device=x.device), lengths - 1]
            return self.logits_argmax(last)

        def decode(
            self, tokens: torch.Tensor, positions: torch.Tensor, span: int, cache: torch.Tensor
        ) -> torch.Tensor:
            """One token for each of the ``n`` running sequences, held in slots ``0..n-1``; ``span``
            is one past the longest position, so attention reads ``cache[..., :span]`` only."""
            n = tokens.shape[0]
            x = (self.emb(tokens) + self.pos(positions))[:, None]
            rows = torch.arange(n, device=x.device)
            mask = (torch.arange(span, device=x.device)[None] <= positions[:, None])[:, None, None]
            d = x.shape[-1]
            for i, blk in enumerate(self.blocks):
                q, k, v = attention_split(F.rms_norm(x, (d,)), blk.qkv, self.heads)
                cache[0, i, rows, :, positions] = k[:, :, 0]
                cache[1, i, rows, :, positions] = v[:, :, 0]
                a = F.scaled_dot_product_attention(
                    q, cache[0, i, :n, :, :span], cache[1, i, :n, :, :span], attn_mask=mask
                )
                x = blk.mlp(x + blk.o(a.transpose(1, 2).reshape(n, 1, d)))
            return self.logits_argmax(x[:, 0])

    torch.manual_seed(int(config.get("seed", 0)))
    dtype = getattr(torch, config.get("dtype", "bfloat16"))
    model = VLM(config)
    for p in model.parameters():  # random weights kept small, so activations stay finite in bf16
        if p.dim() >= 2:
            nn.init.normal_(p, std=0.02)
    return model.to(device, dtype).eval()


# --------------------------------------------------------------------------- metrics


class Histogram:
    """A Prometheus histogram with fixed buckets; observed from the engine thread."""

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


LATENCY_BUCKETS = tuple(
    [
        0.001,
        0.005,
        0.01,
        0.02,
        0.04,
        0.06,
        0.08,
        0.1,
        0.25,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
        20.0,
        40.0,
        80.0,
    ]
)


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


# --------------------------------------------------------------------------- the engine


@dataclass
class Seq:
    """One request inside the engine; ``sink`` receives (token, finished) lists on the event loop."""

    rid: str
    tokens: list[int]
    images: list[Any]
    max_tokens: int
    sink: Callable[[list[tuple[int, bool]]], None]
    arrival: float = field(default_factory=time.perf_counter)
    prompt_len: int = 0
    pos: int = 0  # tokens in the cache
    last: int = 0
    generated: int = 0
    first_at: float | None = None
    cancelled: bool = False


class Engine:
    """Continuous batching on one device: a thread that admits, prefills and decodes."""

    def __init__(
        self,
        config: dict[str, Any],
        device: str,
        max_batch: int,
        prefill_tokens: int,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        import torch

        self.torch, self.config, self.device = torch, config, device
        self.max_batch, self.prefill_tokens, self.loop = max_batch, prefill_tokens, loop
        self.max_seq = config["max_seq"]
        self.image_tokens = image_tokens(config)
        self.model = build_model(config, device)
        d, h = config["d_model"], config["heads"]
        dtype = getattr(torch, config.get("dtype", "bfloat16"))
        # keys and values of every layer for every slot, reserved once (as vLLM reserves its cache)
        self.cache = torch.zeros(
            (2, config["layers"], max_batch, h, self.max_seq, d // h), dtype=dtype, device=device
        )
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []  # running[i] holds slot i
        self.cond = threading.Condition()
        self.stopping = False
        self.reset_counters()
        self.thread = threading.Thread(target=self._run, name="engine", daemon=True)

    def reset_counters(self) -> None:
        """Zero the counters and histograms (after the warm-up, so /metrics counts served requests)."""
        self.steps = 0
        self.step_seconds = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.images = 0
        self.finished = 0
        self.errors = 0
        self.running_peak = 0
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Arrival to first token.", LATENCY_BUCKETS)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Arrival to last token.", LATENCY_BUCKETS)
        self.queue_time = Histogram(
            "vllm:request_queue_time_seconds", "Arrival to admission into the batch.", LATENCY_BUCKETS
        )

    # -- called from the event loop
    def submit(self, seq: Seq) -> None:
        seq.prompt_len = len(seq.tokens) + len(seq.images) * self.image_tokens
        with self.cond:
            self.waiting.append(seq)
            self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()

    def held_tokens(self) -> int:
        return sum(s.pos for s in list(self.running))

    # -- the engine thread
    def _run(self) -> None:
        torch = self.torch
        with torch.inference_mode():
            while True:
                with self.cond:
                    while not self.stopping and not self.waiting and not self.running:
                        self.cond.wait()
                    if self.stopping:
                        return
                    admitted = self._admit()
                t0 = time.perf_counter()
                try:
                    out: list[tuple[Seq, int]] = []
                    if admitted:
                        out += self._prefill(admitted)
                    if self.running:
                        out += self._decode()
                except Exception as exc:  # a broken step fails its requests, never hangs them
                    self._fail(admitted, exc)
                    continue
                self._emit(out)
                self.steps += 1
                self.step_seconds += time.perf_counter() - t0

    def _fail(self, admitted: list[Seq], exc: Exception) -> None:
        import traceback

        traceback.print_exception(exc)
        self.errors += 1
        victims = {id(s): s for s in [*self.running, *admitted]}
        self.running = []
        self.loop.call_soon_threadsafe(_deliver, [(s, [(-1, True)]) for s in victims.values()])

    def _admit(self) -> list[Seq]:
        admitted: list[Seq] = []
        budget = self.prefill_tokens
        while self.waiting and len(self.running) + len(admitted) < self.max_batch:
            seq = self.waiting[0]
            if seq.cancelled:
                self.waiting.popleft()
                continue
            if admitted and seq.prompt_len > budget:
                break
            self.waiting.popleft()
            budget -= seq.prompt_len
            admitted.append(seq)
        now = time.perf_counter()
        for seq in admitted:
            self.queue_time.observe(now - seq.arrival)
        return admitted

    def _prefill(self, seqs: list[Seq]) -> list[tuple[Seq, int]]:
        torch, model, dev = self.torch, self.model, self.device
        images = [im for s in seqs for im in s.images]
        vis = model.vision([im.to(dev, non_blocking=True) for im in images]) if images else None
        longest = max(s.prompt_len for s in seqs)
        x = torch.zeros(
            (len(seqs), longest, self.config["d_model"]), dtype=model.emb.weight.dtype, device=dev
        )
        k = 0
        for row, s in enumerate(seqs):  # the images' tokens first, then the text's
            at = 0
            for _ in s.images:
                x[row, at : at + self.image_tokens] = vis[k]  # type: ignore[index]
                at += self.image_tokens
                k += 1
            if s.tokens:
                x[row, at : at + len(s.tokens)] = model.emb(torch.tensor(s.tokens, device=dev))
        lengths = torch.tensor([s.prompt_len for s in seqs], device=dev)
        first = len(self.running)
        slots = torch.arange(first, first + len(seqs), device=dev)
        nxt = model.prefill(x, lengths, slots, self.cache).tolist()
        self.images += len(images)
        out = []
        for s, tok in zip(seqs, nxt, strict=True):
            s.pos, s.last, s.generated = s.prompt_len, int(tok), 1
            s.images = []  # the pixels are no longer needed
            self.prompt_tokens += s.prompt_len
            self.running.append(s)
            out.append((s, int(tok)))
        self.running_peak = max(self.running_peak, len(self.running))
        return out

    def _decode(self) -> list[tuple[Seq, int]]:
        torch, dev = self.torch, self.device
        live = [s for s in self.running if s.generated < s.max_tokens]  # just prefilled ones too
        if not live:
            return []
        tokens = torch.tensor([s.last for s in self.running], device=dev)
        positions = torch.tensor([s.pos for s in self.running], device=dev)
        span = max(s.pos for s in self.running) + 1
        nxt = self.model.decode(tokens, positions, span, self.cache).tolist()
        out = []
        for s, tok in zip(self.running, nxt, strict=True):
            if s.generated < s.max_tokens and not s.cancelled:
                s.pos += 1
                s.last = int(tok)
                s.generated += 1
                out.append((s, int(tok)))
        return out

    def _emit(self, produced: list[tuple[Seq, int]]) -> None:
        now = time.perf_counter()
        batches: dict[int, tuple[Seq, list[tuple[int, bool]]]] = {}
        # a sequence prefilled in this iteration has two tokens here: only the later one can finish it
        last = {id(s): i for i, (s, _) in enumerate(produced)}
        for i, (s, tok) in enumerate(produced):
            self.generation_tokens += 1
            if s.first_at is None:
                s.first_at = now
                self.ttft.observe(now - s.arrival)
            done = last[id(s)] == i and s.generated >= s.max_tokens
            if done:
                self.e2e.observe(now - s.arrival)
                self.finished += 1
            batches.setdefault(id(s), (s, []))[1].append((tok, done))
        self._release()
        if batches:
            self.loop.call_soon_threadsafe(_deliver, list(batches.values()))

    def _release(self) -> None:
        """Gives finished and abandoned sequences' slots back, moving the last running sequence into
        each freed slot so the running ones stay in slots ``0..n-1``."""
        for i in range(len(self.running) - 1, -1, -1):
            s = self.running[i]
            if s.generated < s.max_tokens and not s.cancelled:
                continue
            last = len(self.running) - 1
            if i != last:
                moved = self.running[last]
                self.cache[:, :, i, :, : moved.pos] = self.cache[:, :, last, :, : moved.pos]
                self.running[i] = moved
            self.running.pop()


def _deliver(batches: list[tuple[Seq, list[tuple[int, bool]]]]) -> None:
    for s, items in batches:
        if not s.cancelled:
            s.sink(items)


# --------------------------------------------------------------------------- HTTP


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def word(tok: int) -> str:
    return f" w{tok}"


def tokenize(text: str, vocab: int) -> list[int]:
    return [zlib.crc32(w.encode()) % vocab for w in text.split()]


class Server:
    """The HTTP side: parses requests, decodes images off the event loop, streams tokens."""

    def __init__(self, args: argparse.Namespace, config: dict[str, Any]) -> None:
        self.args, self.config = args, config
        self.engine: Engine | None = None
        self.memory = GpuMemory(args.device)
        self.pool = ThreadPoolExecutor(max_workers=args.decode_threads, thread_name_prefix="image")
        self.use_pillow = args.image_decoder == "pillow" or (
            args.image_decoder == "auto" and _pillow() is not None
        )
        self.bad_requests = 0

    async def start(self, app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        a = self.args
        self.engine = await loop.run_in_executor(
            None, lambda: Engine(self.config, a.device, a.max_batch, a.prefill_tokens, loop)
        )
        self.engine.thread.start()
        await self.warm_up()

    async def stop(self, app: web.Application) -> None:
        if self.engine is not None:
            self.engine.stop()
        self.pool.shutdown(wait=False)

    async def warm_up(self) -> None:
        """A text and an image request through the engine before the port is announced, so the
        first measured request pays no kernel selection or allocator growth of its own."""
        import torch

        assert self.engine is not None
        done = asyncio.get_running_loop().create_future()
        left = [2]

        def sink(items: list[tuple[int, bool]]) -> None:
            if any(f for _, f in items):
                left[0] -= 1
                if left[0] == 0 and not done.done():
                    done.set_result(None)

        side = self.config["vision"]["image_size"]
        image = torch.zeros((3, side, side), dtype=torch.uint8)
        self.engine.submit(Seq("warm-0", [1, 2, 3], [], 4, sink))
        self.engine.submit(Seq("warm-1", [4, 5], [image], 4, sink))
        await done
        self.engine.reset_counters()

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
            text = " ".join(prompt) if isinstance(prompt, list) else str(prompt)
            urls = []
        n = body.get("max_completion_tokens", body.get("max_tokens")) or 16
        if not isinstance(n, int) or n < 1:
            raise ImageError("max_tokens must be a positive integer")
        return text, urls, n

    async def generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = time.perf_counter()
        engine = self.engine
        if engine is None:
            return web.json_response({"error": {"message": "starting"}}, status=503)
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
            self.bad_requests += 1
            status = exc.status if isinstance(exc, ImageError) else 400
            return web.json_response(
                {"error": {"message": str(exc), "type": "invalid_request_error"}}, status=status
            )
        tokens = tokenize(text, self.config["vocab"]) or [0]
        prompt_len = len(tokens) + len(images) * engine.image_tokens
        if prompt_len + n > engine.max_seq:
            self.bad_requests += 1
            msg = f"prompt ({prompt_len} tokens) + max_tokens ({n}) exceeds the model's {engine.max_seq}"
            return web.json_response({"error": {"message": msg, "type": "invalid_request_error"}}, status=400)

        queue: asyncio.Queue[list[tuple[int, bool]]] = asyncio.Queue()
        seq = Seq(uuid.uuid4().hex, tokens, images, n, queue.put_nowait, arrival=arrival)
        engine.submit(seq)
        rid = ("chatcmpl-" if chat else "cmpl-") + seq.rid
        created = int(time.time())
        kind = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": prompt_len, "completion_tokens": n, "total_tokens": prompt_len + n}
        try:
            if not body.get("stream"):
                out: list[int] = []
                while len(out) < n:
                    out += [t for t, _ in await queue.get()]
                    if out and out[-1] < 0:
                        return web.json_response({"error": {"message": "the engine failed"}}, status=500)
                text_out = "".join(word(t) for t in out)
                choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text_out}
                else:
                    choice["text"] = text_out
                return web.json_response(
                    {
                        "id": rid,
                        "object": kind,
                        "created": created,
                        "model": MODEL,
                        "choices": [choice],
                        "usage": usage,
                    }
                )
            resp = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await resp.prepare(request)
            sent = 0
            chunk_kind = kind + ".chunk" if chat else kind
            head = (
                f'data: {{"id":"{rid}","object":"{chunk_kind}","created":{created},"model":"{MODEL}",'
                '"choices":['
            )
            while sent < n:
                items = await queue.get()
                while not queue.empty():  # behind the engine: what is ready goes in one write
                    items += queue.get_nowait()
                if items[-1][0] < 0:  # the engine failed: the stream ends without [DONE]
                    await resp.write_eof()
                    return resp
                parts = []
                for tok, done in items:
                    sent += 1
                    # the chunk as text around a template: json.dumps per token would be most of
                    # the event loop's work at 256 streams (a word " w123" needs no escaping)
                    finish = '"length"' if done else "null"
                    if chat:
                        role = '"role":"assistant",' if sent == 1 else ""
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
                            "model": MODEL,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                )
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            if seq.generated < n:  # the client went away: the engine drops it at its next step
                seq.cancelled = True

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, chat=False)

    async def metrics(self, request: web.Request) -> web.Response:
        e = self.engine
        lab = f'model_name="{MODEL}"'
        out: list[str] = []

        def gauge(
            name: str, value: float | None, help_text: str, labels: str = lab, kind: str = "gauge"
        ) -> None:
            if value is None:
                return
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n{name}{{{labels}}} {value!r}\n")

        if e is not None:
            with e.cond:
                waiting = len(e.waiting)
            held = e.held_tokens()
            gauge("vllm:num_requests_running", float(len(e.running)), "Sequences in the batch.")
            gauge("vllm:num_requests_waiting", float(waiting), "Requests waiting for a slot.")
            gauge(
                "vllm:kv_cache_usage_perc",
                held / (e.max_batch * e.max_seq),
                "Tokens held over the cache's tokens.",
            )
            gauge(
                "vllm:num_preemptions_total", 0.0, "Preemptions (this engine never preempts).", kind="counter"
            )
            gauge(
                "vllm:prompt_tokens_total", float(e.prompt_tokens), "Prompt tokens prefilled.", kind="counter"
            )
            gauge(
                "vllm:generation_tokens_total",
                float(e.generation_tokens),
                "Tokens generated.",
                kind="counter",
            )
            gauge("vllm:request_success_total", float(e.finished), "Requests finished.", kind="counter")
            for h in (e.ttft, e.e2e, e.queue_time):
                out.append(h.render(lab))
            gauge("mcp_gpu_model_server_steps_total", float(e.steps), "Engine iterations.", kind="counter")
            gauge(
                "mcp_gpu_model_server_step_seconds_total",
                e.step_seconds,
                "Wall time in engine iterations.",
                kind="counter",
            )
            gauge("mcp_gpu_model_server_images_total", float(e.images), "Images encoded.", kind="counter")
            gauge(
                "mcp_gpu_model_server_running_peak",
                float(e.running_peak),
                "Most sequences in one step so far.",
            )
            gauge(
                "mcp_gpu_model_server_engine_errors_total",
                float(e.errors),
                "Engine steps that failed.",
                kind="counter",
            )
            gauge("mcp_gpu_model_server_max_batch", float(e.max_batch), "KV-cache slots.")
        gauge(
            "mcp_gpu_model_server_bad_requests_total",
            float(self.bad_requests),
            "Requests answered 4xx.",
            kind="counter",
        )
        mem = self.memory.read()
        if mem is not None:
            g = 'gpu_uuid="0"'
            gauge("nv_gpu_memory_used_bytes", mem[0], "GPU memory used (the whole device).", g)
            gauge("nv_gpu_memory_total_bytes", mem[1], "GPU memory in all.", g)
            torch = e.torch if e is not None else None
            if torch is not None:
                gauge(
                    "mcp_gpu_model_server_torch_allocated_bytes",
                    float(torch.cuda.memory_allocated()),
                    "Bytes in live tensors (PyTorch's caching allocator).",
                )
                gauge(
                    "mcp_gpu_model_server_torch_reserved_bytes",
                    float(torch.cuda.memory_reserved()),
                    "Bytes the caching allocator holds from the driver.",
                )
                gauge(
                    "mcp_gpu_model_server_torch_max_allocated_bytes",
                    float(torch.cuda.max_memory_allocated()),
                    "Peak bytes in live tensors since start.",
                )
        gauge("process_resident_memory_bytes", _process_rss(), "Resident memory of this process.", "")
        text = "".join(out).replace("{}", "")
        return web.Response(text=text, content_type="text/plain")

    async def memory_snapshot(self, request: web.Request) -> web.Response:
        """The caching allocator's segments, reduced to what the fragmentation finding reads."""
        if not self.args.device.startswith("cuda") or self.engine is None:
            return web.json_response({"device": self.args.device, "segments": []})
        torch = self.engine.torch
        raw = await asyncio.get_running_loop().run_in_executor(None, torch.cuda.memory_snapshot)
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

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "mcp-gpu-model-server"}],
            }
        )

    async def info(self, request: web.Request) -> web.Response:
        e = self.engine
        params = sum(p.numel() for p in e.model.parameters()) if e is not None else None
        return web.json_response(
            {
                "model": MODEL,
                "config": self.config,
                "parameters": params,
                "image_tokens": image_tokens(self.config),
                "max_batch": self.args.max_batch,
                "prefill_tokens": self.args.prefill_tokens,
                "device": self.args.device,
                "device_name": (
                    e.torch.cuda.get_device_name() if e and self.args.device.startswith("cuda") else None
                ),
                "torch": e.torch.__version__ if e else None,
                "image_decoder": "pillow" if self.use_pillow else "png-zlib",
                "kv_cache_bytes": e.cache.numel() * e.cache.element_size() if e else None,
            }
        )

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.on_startup.append(self.start)
        app.on_cleanup.append(self.stop)
        app.add_routes(
            [
                web.post("/v1/chat/completions", self.chat),
                web.post("/v1/completions", self.completions),
                web.get("/v1/models", self.models),
                web.get("/metrics", self.metrics),
                web.get("/debug/memory_snapshot", self.memory_snapshot),
                web.get("/debug/info", self.info),
                web.get("/health", self.health),
            ]
        )
        return app


def load_config(preset: str, overrides: str | None) -> dict[str, Any]:
    """A preset, with a JSON object's keys over it (``vision`` merged key by key)."""
    config = json.loads(json.dumps(PRESETS[preset]))
    if overrides:
        extra = json.loads(overrides)
        vision = {**config["vision"], **extra.pop("vision", {})}
        config.update(extra)
        config["vision"] = vision
    v = config["vision"]
    if v["image_size"] % (v["patch"] * v["pool"]) or config["d_model"] % config["heads"]:
        raise SystemExit("config: image_size must divide by patch*pool, d_model by heads")
    return config


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (tests)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--config", help="JSON object of config keys over the preset")
    parser.add_argument(
        "--max-batch", type=int, default=256, help="KV-cache slots: sequences decoded together"
    )
    parser.add_argument("--prefill-tokens", type=int, default=8192, help="prompt tokens admitted per step")
    parser.add_argument("--decode-threads", type=int, default=8, help="threads decoding images")
    parser.add_argument("--image-decoder", choices=("auto", "pillow", "png"), default="auto")
    parser.add_argument(
        "--no-uvloop",
        dest="uvloop",
        action="store_false",
        help="asyncio's own loop even where uvloop is installed",
    )
    args = parser.parse_args(argv)
    config = load_config(args.preset, args.config)
    srv = Server(args, config)

    async def announce(app: web.Application) -> None:
        print(json.dumps({"event": "listening", "port": args.port, "device": args.device}), flush=True)

    app = srv.app()
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
