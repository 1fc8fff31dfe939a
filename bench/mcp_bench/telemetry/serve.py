"""``mcp-bench gpu-sampler``: the serving GPUs' NVML telemetry, sampled on their node for a run.

The load generator's own telemetry says nothing about the server's GPUs when the two run on
different nodes. This service runs on the server's node (the operator places it there, with no
GPU request), samples every GPU it can see from the start (5 ms and up), and answers the shards:
``GET /window?start_unix_ns=..&end_unix_ns=..[&settled_unix_ns=..]`` gives the summary of one
level (the same shape as a shard's own ``level.telemetry``, with the memory around it), labelled
``role: serving`` and the node. Clients map their wall clock onto the sampler's monotonic one
through the offset taken at start, so a level's window is the same instants on both sides (up to
the nodes' clock agreement). ``POST /done?client=ID`` says a client has finished; the service
stops once every expected client has, or at its deadline. Without NVML or a GPU every answer is
``unavailable`` with the reason, and so is the termination message: never a series of zeros.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from mcp_bench.telemetry.fairness import gpu_fairness
from mcp_bench.telemetry.nvml import GpuSampler, TelemetryConfigError
from mcp_bench.telemetry.series import DEFAULT_CAPACITY
from mcp_bench.telemetry.stats import memory_around, summarise

ROLE = "serving"
DEFAULT_PORT = 9401
MAX_CAPACITY = 2_000_000  # samples: about 2.8 h at 5 ms for one GPU's fields (~150 MB for 8 GPUs)


def capacity_for(interval_s: float, deadline_s: float) -> int:
    """Enough ring slots for the whole run (its deadline), within bounds."""
    return max(DEFAULT_CAPACITY, min(MAX_CAPACITY, int(deadline_s / interval_s) + 100))


class SamplerService:
    """The sampler and what the HTTP handlers ask of it; the handlers stay thin."""

    def __init__(self, sampler: GpuSampler, node: str, clients: int) -> None:
        self.sampler = sampler
        self.node = node
        self.clients = clients
        self.done: set[str] = set()
        self.finished = asyncio.Event()
        self.offset_ns = 0  # wall clock minus monotonic clock, taken when sampling starts
        self.started_unix_ns = 0

    def start(self) -> None:
        self.offset_ns = time.time_ns() - time.perf_counter_ns()
        self.started_unix_ns = time.time_ns()
        self.sampler.start()

    def _base(self) -> dict[str, Any]:
        return {"role": ROLE, "node": self.node}

    def health(self) -> dict[str, Any]:
        series = self.sampler.series
        out = {**self._base(), "status": series.status, "interval_s": self.sampler.interval_s}
        if series.available:
            out["gpus"] = [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in series.gpus]
        else:
            out["reason"] = series.reason
        return out

    def window(
        self, start_unix_ns: int, end_unix_ns: int, settled_unix_ns: int | None = None
    ) -> dict[str, Any]:
        """One level's summary between two wall-clock instants (as the shard measured them)."""
        if end_unix_ns < start_unix_ns:
            raise ValueError("end_unix_ns before start_unix_ns")
        series = self.sampler.series
        if not series.available:
            return {**self._base(), "status": series.status, "reason": series.reason}
        start, end = start_unix_ns - self.offset_ns, end_unix_ns - self.offset_ns
        out = summarise(series, start, end)
        if out.get("status") == "ok" and len(series.gpus) > 1:
            out["fairness"] = gpu_fairness(series.window(start, end))
        settled = None if settled_unix_ns is None else settled_unix_ns - self.offset_ns
        memory = memory_around(series, start, end, settled, self.sampler.interval_s)
        if memory is not None:
            out["memory"] = memory
        if start_unix_ns < self.started_unix_ns:
            late = (self.started_unix_ns - start_unix_ns) / 1e9
            out["partial"] = f"sampling began {late:.3f} s after the window's start"
        return {**self._base(), **out}

    def client_done(self, client: str) -> int:
        self.done.add(client)
        if len(self.done) >= self.clients:
            self.finished.set()
        return len(self.done)

    def summary_line(self) -> str:
        """The termination message: what was sampled, or why nothing was."""
        series = self.sampler.series
        if not series.available:
            return f"serving GPUs on {self.node}: unavailable: {series.reason}"
        stats = series.stats
        cost = stats.cpu_pct_of_one_core
        return (
            f"serving GPUs on {self.node}: {stats.ticks} ticks of {len(series.gpus)} GPU(s) every "
            f"{self.sampler.interval_s * 1e3:g} ms, {stats.missed_ticks} missed, "
            f"{'n/a' if cost is None else f'{cost:.1f}'}% of one core; "
            f"{len(self.done)}/{self.clients} client(s) done"
        )


def _int(request: web.Request, name: str, required: bool = True) -> int | None:
    text = request.query.get(name)
    if text is None:
        if required:
            raise web.HTTPBadRequest(text=f"{name} is required")
        return None
    try:
        return int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer, got {text!r}") from None


def build_app(service: SamplerService) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response(service.health())

    async def window(request: web.Request) -> web.Response:
        start, end = _int(request, "start_unix_ns"), _int(request, "end_unix_ns")
        settled = _int(request, "settled_unix_ns", required=False)
        assert start is not None and end is not None
        try:
            body = await asyncio.to_thread(service.window, start, end, settled)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=str(exc)) from None
        return web.json_response(body)

    async def done(request: web.Request) -> web.Response:
        client = request.query.get("client", "")
        if not client:
            raise web.HTTPBadRequest(text="client is required")
        return web.json_response({"done": service.client_done(client), "expected": service.clients})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/window", window)
    app.router.add_post("/done", done)
    return app


def write_termination_message(message: str) -> None:
    path = Path(os.environ.get("MCP_TERMINATION_MESSAGE_PATH", "/dev/termination-log"))
    with contextlib.suppress(OSError):  # outside a pod: the line is printed as well
        path.write_text(message[:4096])


async def serve(service: SamplerService, host: str, port: int, deadline_s: float) -> str:
    """Sample and answer until every client is done or the deadline passes; the summary line."""
    await asyncio.to_thread(service.start)
    runner = web.AppRunner(build_app(service), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    print(f"gpu-sampler on {service.node} listening on {host}:{port}: {service.health()}", flush=True)
    try:
        await asyncio.wait_for(service.finished.wait(), deadline_s)
        reason = "every client done"
    except TimeoutError:
        reason = f"deadline of {deadline_s:g} s"
    finally:
        await runner.cleanup()
        await asyncio.to_thread(service.sampler.stop)
    return f"{service.summary_line()} (stopped: {reason})"


def add_sampler_command(sub: Any) -> None:
    """``mcp-bench gpu-sampler``, registered on the CLI's subcommands."""
    cmd = sub.add_parser(
        "gpu-sampler",
        help="sample this node's GPUs (NVML) for a run and serve per-level summaries to the shards",
    )
    cmd.add_argument("--host", default="0.0.0.0", help="address to listen on (default all)")
    cmd.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    cmd.add_argument("--interval", type=float, default=0.1, help="seconds between samples, 0.005..60")
    cmd.add_argument("--node", default=os.environ.get("NODE_NAME", ""), help="node name reported")
    cmd.add_argument("--clients", type=int, default=1, help="clients (shards) that say done before it stops")
    cmd.add_argument("--deadline", type=float, default=3600.0, help="seconds after which it stops anyway")
    cmd.set_defaults(func=cmd_gpu_sampler)


def cmd_gpu_sampler(args: argparse.Namespace, out: Any, err: Any) -> int:
    if args.clients < 1 or args.deadline <= 0:
        err.print("mcp-bench: error: --clients must be >= 1 and --deadline > 0", markup=False)
        return 2
    try:
        sampler = GpuSampler(
            args.interval,
            slow_interval_s=max(1.0, args.interval),
            capacity=capacity_for(args.interval, args.deadline),
        )
    except TelemetryConfigError as exc:
        err.print(f"mcp-bench: error: --interval: {exc}", markup=False)
        return 2
    service = SamplerService(sampler, args.node or os.uname().nodename, args.clients)
    line = asyncio.run(serve(service, args.host, args.port, args.deadline))
    print(line, flush=True)
    write_termination_message(line)
    return 0
