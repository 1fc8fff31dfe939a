#!/usr/bin/env python3
"""A small transformer language model served on a CUDA GPU behind an OpenAI-compatible
``/v1/completions`` endpoint (streamed or not), for producing traps 10 and 12 on real hardware
and measuring them with ``mcp-bench run``.

- ``--compile shapes``: the model goes through ``torch.compile(dynamic=False)`` and every new
  prompt length compiles on its first request (trap 12, the recompile avalanche);
  ``--compile buckets --buckets 16,64,128,256``: prompts are padded to the next bucket and every
  bucket is compiled before the server listens (the fix); ``--compile off``: eager.
- ``--route URL,URL --weights 8,1``: a front that spreads requests over instances (each one this
  server in its own process, sharing the GPU) by fixed weights; uneven weights starve an instance
  (trap 10). Its ``/metrics`` joins the instances' own.

``/metrics`` (Prometheus text): ``mcp_gpu_server_instance_busy_seconds_total{instance}`` (GPU time
of the instance's forward passes, timed with CUDA events) and ``mcp_gpu_server_compiles_total``
(graphs compiled by TorchDynamo). Each prompt word is a token; each output token after the first
runs the model on the last token alone (no KV cache: the latency matters here, not the text).
Needs PyTorch with CUDA and aiohttp.

    python3 measurements/gpu_traps/gpu_server.py --port 8100 --compile shapes
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

MODEL = "trap-lm"
VOCAB = 32000


def build_model(device: str, layers: int) -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
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
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(F.rms_norm(x, (d,)))))

    class TinyLM(nn.Module):
        def __init__(self, d: int = 1024, layers: int = 8, heads: int = 16, ff: int = 4096) -> None:
            super().__init__()
            self.emb = nn.Embedding(VOCAB, d)
            self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
            self.head = nn.Linear(d, VOCAB, bias=False)

        def forward(self, ids: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
            h = self.emb(ids)
            for blk in self.blocks:
                h = blk(h)
            h = h[torch.arange(h.shape[0], device=h.device), last]  # a tensor index: no recompile
            return self.head(F.rms_norm(h, (h.shape[-1],))).argmax(-1)

    torch.manual_seed(0)
    return TinyLM(layers=layers).to(device, torch.bfloat16).eval()


class Instance:
    """One model on the GPU, one request at a time (its own worker thread)."""

    def __init__(
        self,
        compile_mode: str,
        buckets: list[int],
        device: str = "cuda",
        layers: int = 8,
        warmup_thread: str = "serving",
    ) -> None:
        import torch
        import torch._dynamo

        self.torch = torch
        cfg = torch._dynamo.config
        for name, value in (("recompile_limit", 64), ("cache_size_limit", 64)):
            if hasattr(cfg, name):
                setattr(cfg, name, value)
        for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(cfg, name):
                setattr(cfg, name, 512)
        self.device = device
        self.model = build_model(device, layers)
        self.fn = self.model if compile_mode == "off" else torch.compile(self.model, dynamic=False)
        self.buckets = sorted(buckets) if compile_mode == "buckets" else []
        self.busy_s = 0.0
        self.pool = ThreadPoolExecutor(max_workers=1)
        # compiled and run once before the server listens, on the thread that will serve (another
        # thread leaves the serving thread's first call per shape ~50 ms slow on an H200)
        for n in [1, *self.buckets]:
            if warmup_thread == "serving":
                self.pool.submit(self._forward, [0] * n, n - 1).result()
            else:
                self._forward([0] * n, n - 1)
        self.busy_s = 0.0

    def compiles(self) -> float:
        from torch._dynamo.utils import counters

        return float(counters["stats"]["unique_graphs"])

    def _forward(self, ids: list[int], last: int) -> int:
        torch = self.torch
        with torch.inference_mode():
            x = torch.tensor([ids], device=self.device)
            i = torch.tensor([last], device=self.device)
            if self.device == "cpu":  # a smoke test off the GPU: wall time
                t0 = time.perf_counter()
                out = int(self.fn(x, i).item())
                self.busy_s += time.perf_counter() - t0
                return out
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            tok = self.fn(x, i)
            end.record()
            out = int(tok.item())
            self.busy_s += start.elapsed_time(end) / 1e3
        return out

    def generate(self, ids: list[int], n: int, emit: Any) -> None:
        """Runs in the worker thread; ``emit(token)`` per token."""
        last = len(ids) - 1
        padded = ids
        for b in self.buckets:
            if b >= len(ids):
                padded = ids + [0] * (b - len(ids))
                break
        tok = self._forward(padded, last)
        emit(tok)
        for _ in range(n - 1):
            tok = self._forward([tok], 0)
            emit(tok)


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def model_app(inst: Instance, instance_id: str) -> web.Application:
    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = body.get("prompt", "")
        prompt = " ".join(prompt) if isinstance(prompt, list) else str(prompt)
        ids = [zlib.crc32(w.encode()) % VOCAB for w in prompt.split()] or [0]
        n = int(body.get("max_tokens") or 16)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[int | None] = asyncio.Queue()

        def emit(tok: int | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, tok)

        def run() -> None:
            try:
                inst.generate(ids, n, emit)
            finally:
                emit(None)

        job = loop.run_in_executor(inst.pool, run)
        rid, created = "cmpl-" + uuid.uuid4().hex, int(time.time())
        usage = {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}
        if not body.get("stream"):
            toks = []
            while (t := await queue.get()) is not None:
                toks.append(t)
            await job
            text = "".join(f" tok{t}" for t in toks)
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
            return web.json_response(
                {
                    "id": rid,
                    "object": "text_completion",
                    "created": created,
                    "model": MODEL,
                    "choices": [choice],
                    "usage": usage,
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        sent = 0
        while (t := await queue.get()) is not None:
            sent += 1
            choice = {
                "index": 0,
                "text": f" tok{t}",
                "logprobs": None,
                "finish_reason": "length" if sent == n else None,
            }
            await resp.write(
                _sse(
                    {
                        "id": rid,
                        "object": "text_completion",
                        "created": created,
                        "model": MODEL,
                        "choices": [choice],
                    }
                )
            )
        await job
        opts = body.get("stream_options") or {}
        if isinstance(opts, dict) and opts.get("include_usage"):
            await resp.write(
                _sse(
                    {
                        "id": rid,
                        "object": "text_completion",
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

    async def metrics(request: web.Request) -> web.Response:
        lab = f'{{instance="{instance_id}"}}'
        text = (
            "# TYPE mcp_gpu_server_instance_busy_seconds_total counter\n"
            f"mcp_gpu_server_instance_busy_seconds_total{lab} {inst.busy_s:.6f}\n"
            "# TYPE mcp_gpu_server_compiles_total counter\n"
            f"mcp_gpu_server_compiles_total{lab} {inst.compiles():.0f}\n"
        )
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.add_routes(
        [
            web.post("/v1/completions", completions),
            web.get("/v1/models", models),
            web.get("/metrics", metrics),
            web.get("/health", lambda r: web.Response(text="ok")),
        ]
    )
    return app


async def models(request: web.Request) -> web.Response:
    return web.json_response(
        {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "gpu-traps"}]}
    )


def route_app(backends: list[str], weights: list[int]) -> web.Application:
    """Weighted round robin over the instances (8,1: eight requests to the first, one to the second)."""
    order = itertools.cycle([i for i, w in enumerate(weights) for _ in range(w)])
    session: dict[str, ClientSession] = {}

    async def start(app: web.Application) -> None:
        session["s"] = ClientSession(timeout=ClientTimeout(total=600))

    async def stop(app: web.Application) -> None:
        await session["s"].close()

    async def completions(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        url = backends[next(order)] + "/v1/completions"
        async with session["s"].post(url, data=raw, headers={"Content-Type": "application/json"}) as up:
            resp = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers["Content-Type"]})
            await resp.prepare(request)
            async for chunk in up.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    async def metrics(request: web.Request) -> web.Response:
        seen: set[str] = set()
        lines = []
        for b in backends:
            async with session["s"].get(b + "/metrics") as r:
                for line in (await r.text()).splitlines():
                    if line.startswith("#"):
                        if line in seen:
                            continue
                        seen.add(line)
                    lines.append(line)
        types = [x for x in lines if x.startswith("#")]
        body = [x for x in lines if not x.startswith("#")]
        text = "".join(
            f"{t}\n" + "".join(f"{x}\n" for x in body if x.startswith(t.split()[2] + "{")) for t in types
        )
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.add_routes(
        [
            web.post("/v1/completions", completions),
            web.get("/v1/models", models),
            web.get("/metrics", metrics),
            web.get("/health", lambda r: web.Response(text="ok")),
        ]
    )
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--compile", choices=("shapes", "buckets", "off"), default="off")
    parser.add_argument("--buckets", default="16,64,128,256")
    parser.add_argument("--instance", default="0", help="label of this instance in /metrics")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument(
        "--warmup-thread",
        choices=("serving", "main"),
        default="serving",
        help="where the start-up compile and warm-up run: the serving thread, or the main thread",
    )
    parser.add_argument("--route", help="front mode: comma-separated instance URLs")
    parser.add_argument("--weights", help="front mode: requests per instance in each round, e.g. 8,1")
    args = parser.parse_args(argv)
    if args.route:
        backends = args.route.split(",")
        weights = [int(w) for w in (args.weights or ",".join("1" * len(backends))).split(",")]
        app = route_app(backends, weights)
    else:
        buckets = [int(b) for b in args.buckets.split(",")]
        inst = Instance(args.compile, buckets, args.device, args.layers, args.warmup_thread)
        app = model_app(inst, args.instance)
    print(json.dumps({"event": "listening", "port": args.port}), flush=True)
    web.run_app(app, host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
