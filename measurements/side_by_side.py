"""mcp-bench and AIPerf against the same reference server, level by level, errors against its truth.

Why: a benchmark's error is only known against a server that records what it really did. The
reference server (``procs`` processes on one port, see :mod:`refserver_pool`) logs for every
request its arrival, each chunk's write instant and how late each write was on its model. For
each closed-loop concurrency, each tool runs on warm connections after a warm-up, and its
reported percentiles are compared with the same percentiles of the server's truth for the
requests sent in the tool's measured window:

* error = reported - truth, at P50 and P99, for TTFT, ITL (every gap between content chunks),
  TPOT (per request) and e2e (to the stream's ``data: [DONE]``, where both clients end it);
* the server's own lateness (its writes past the model's deadlines) beside them: it is already in
  the truth, so it is subtracted, but a server far behind its model is saturated and the row says so.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiperf_tool
import numpy as np
from refserver_pool import ServerPool, start_pool

from mcp_bench.engines import run_plan_sync
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import LevelResult

METRICS = ("ttft", "itl", "tpot", "e2e")
# the server is taken for saturated past this lateness P99 (ms): its truth then drifts from the model
SATURATED_LATE_MS = 2.0


@dataclass
class Row:
    """One tool at one level: reported and true P50/P99 per metric, the server's lateness."""

    tool: str
    concurrency: int
    requests: int
    failed: int
    reported: dict[str, list[float | None]] = field(default_factory=dict)  # metric -> [p50, p99]
    truth: dict[str, list[float | None]] = field(default_factory=dict)
    late: list[float | None] = field(default_factory=lambda: [None, None])
    server_requests: int = 0
    note: str = ""

    def error(self, metric: str, i: int) -> float | None:
        r, t = self.reported.get(metric, [None, None])[i], self.truth.get(metric, [None, None])[i]
        return None if r is None or t is None else r - t


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def truth_between(timings: dict[str, list[Any]], first_ns: int, last_ns: int) -> dict[str, list[float]]:
    """The server's distributions for requests that arrived in [first_ns, last_ns] (wall clock)."""
    keep = [first_ns <= a <= last_ns for a in timings.get("arrival_unix_ns", [])]
    out: dict[str, list[float]] = {m: [] for m in (*METRICS, "late")}
    for i, kept in enumerate(keep):
        if not kept:
            continue
        out["ttft"].append(timings["ttft_ms"][i])
        done = timings.get("done_ms", [None] * len(keep))[i]
        out["e2e"].append(timings["e2e_ms"][i] if done is None else done)
        if timings["tpot_ms"][i] is not None:
            out["tpot"].append(timings["tpot_ms"][i])
        out["itl"].extend(b - a for a, b in itertools.pairwise(timings["chunks_ms"][i]))
        out["late"].extend(timings["late_ms"][i])
    return out


def bench_plan(url: str, concurrency: int, args: argparse.Namespace, workers: int) -> RunPlan:
    return RunPlan.model_validate(
        {
            "url": url,
            "workers": workers,
            "backend": "openai",
            "model": "refmodel",
            "levels": {"concurrency": [concurrency], "connections": "warm"},
            "stage": {"warmup_s": args.warmup, "duration_s": args.seconds},
            "request_timeout_s": 60,
            "payload": {
                "prompt": " ".join(f"w{i}" for i in range(args.input_tokens)),
                "max_output_tokens": args.tokens,
                "stream": True,
            },
        }
    )


def _fill(row: Row, reported: dict[str, list[float | None]], truth: dict[str, list[float]]) -> Row:
    row.reported = reported
    row.truth = {m: [pct(truth[m], 50), pct(truth[m], 99)] for m in METRICS}
    row.late = [pct(truth["late"], 50), pct(truth["late"], 99)]
    row.server_requests = len(truth["ttft"])
    if row.late[1] is not None and row.late[1] > SATURATED_LATE_MS:
        row.note = (row.note + "; " if row.note else "") + "server saturated"
    return row


def run_bench(pool: ServerPool, concurrency: int, args: argparse.Namespace, workers: int) -> Row:
    pool.timings(reset=True)
    level: LevelResult = run_plan_sync(bench_plan(pool.url, concurrency, args, workers)).levels[0]
    slack = 5_000_000  # a request reaches the server a little after the client sent it
    first, last = level.first_sent_unix_ns or 0, (level.last_sent_unix_ns or 0) + slack
    truth = truth_between(pool.timings(reset=True), first, last)
    reported: dict[str, list[float | None]] = {}
    for m in METRICS:
        t = level.latency.get(m)
        reported[m] = [None, None] if t is None else [t.p50_ms, t.p99_ms]
    row = Row(f"mcp-bench w{workers}", concurrency, level.completed, level.failed)
    if level.client_bound:
        row.note = "client bound: " + "; ".join(level.client_bound)
    if level.workers:
        row.note = (row.note + "; " if row.note else "") + (
            f"client cpu max {max(w.cpu_share for w in level.workers):.0%}"
        )
    return _fill(row, reported, truth)


def run_aiperf(pool: ServerPool, py: Path, concurrency: int, args: argparse.Namespace) -> Row:
    pool.timings(reset=True)
    artifacts = Path(args.artifacts) / f"aiperf-c{concurrency}"
    run = aiperf_tool.profile(
        py, pool.url, concurrency, args.seconds, args.input_tokens, args.tokens, artifacts
    )
    truth = truth_between(pool.timings(reset=True), run.first_start_ns, run.last_start_ns + 5_000_000)
    dists = {"ttft": run.ttft, "itl": run.itl, "tpot": run.tpot, "e2e": run.e2e}
    reported = {m: [pct(v, 50), pct(v, 99)] for m, v in dists.items()}
    return _fill(
        Row(f"aiperf {aiperf_tool.VERSION}", concurrency, len(run.ttft), run.failed), reported, truth
    )


def _cell(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "-"
    return f"{v:+.2f}" if signed else f"{v:.2f}"


def print_header(args: argparse.Namespace) -> None:
    e2e = args.ttft_ms + (args.tokens - 1) * args.tpot_ms
    print(
        f"\nreference server: {args.server_procs} process(es), TTFT {args.ttft_ms:g} ms, "
        f"TPOT {args.tpot_ms:g} ms, "
        f"{args.tokens} tokens (model e2e {e2e:g} ms); closed loop, warm connections, "
        f"{args.seconds:g} s measured per tool and level; host {os.cpu_count()} CPUs\n"
        "errors = reported - server truth (ms), P50 / P99; 'late' = the server's writes past its model"
    )
    cols = (
        "c",
        "tool",
        "requests",
        "TTFT err",
        "ITL err",
        "TPOT err",
        "e2e err",
        "server late",
        "TTFT truth",
    )
    print(f"{cols[0]:>4} {cols[1]:<15} {cols[2]:>8} " + " ".join(f"{c:>15}" for c in cols[3:]))


def print_row(row: Row) -> None:
    pairs = [f"{_cell(row.error(m, 0))} / {_cell(row.error(m, 1))}" for m in ("ttft", "itl", "tpot", "e2e")]
    pairs.append(f"{_cell(row.late[0])} / {_cell(row.late[1])}")
    pairs.append(f"{_cell(row.truth['ttft'][0], False)} / {_cell(row.truth['ttft'][1], False)}")
    line = f"{row.concurrency:>4} {row.tool:<15} {row.requests:>8} " + " ".join(f"{p:>15}" for p in pairs)
    extra = f" {row.failed} failed" if row.failed else ""
    print(line + (f"  ({row.note}{extra})" if row.note or extra else ""), flush=True)


def per_level(values: str, levels: list[int]) -> list[int]:
    got = [int(v) for v in values.split(",")]
    return got * len(levels) if len(got) == 1 else got


def run(args: argparse.Namespace) -> int:
    levels = [int(c) for c in args.levels.split(",")]
    workers = per_level(args.bench_workers, levels)
    exe = None
    if not args.skip_aiperf:
        wheels = Path(args.aiperf_wheels) if args.aiperf_wheels else None
        exe = aiperf_tool.ensure(aiperf_tool.VERSION, wheels, args.aiperf_inherit_site)
        aiperf_tool.tokenizer()
    server_args = [
        "--ttft-ms",
        str(args.ttft_ms),
        "--tpot-ms",
        str(args.tpot_ms),
        "--default-max-tokens",
        str(args.tokens),
    ]
    pool = start_pool(args.server_procs, server_args)
    rows: list[Row] = []
    print_header(args)
    try:
        for c, w in zip(levels, workers, strict=True):
            rows.append(run_bench(pool, c, args, w))
            print_row(rows[-1])
            if exe is not None:
                try:
                    rows.append(run_aiperf(pool, exe, c, args))
                    print_row(rows[-1])
                except RuntimeError as exc:
                    print(f"{c:>4} aiperf failed: {exc}", flush=True)
    finally:
        pool.stop()
    if args.json_out:
        doc = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "host": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "model": {"ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms, "tokens": args.tokens},
            "server_procs": args.server_procs,
            "seconds": args.seconds,
            "rows": [asdict(r) for r in rows],
        }
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\nwritten: {args.json_out}")
    return 0


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("side by side (--side-by-side)")
    g.add_argument("--levels", default="8,64,256,512", help="closed-loop concurrencies")
    g.add_argument("--server-procs", type=int, default=1, help="reference-server processes (SO_REUSEPORT)")
    g.add_argument("--bench-workers", default="1", help="mcp-bench workers, one value or one per level")
    g.add_argument("--warmup", type=float, default=1.0, help="mcp-bench warm-up seconds per level")
    g.add_argument("--input-tokens", type=int, default=16)
    g.add_argument("--skip-aiperf", action="store_true", help="mcp-bench alone")
    g.add_argument("--aiperf-wheels", help="install AIPerf from these wheels (no network)")
    g.add_argument(
        "--aiperf-inherit-site",
        action="store_true",
        help="AIPerf's venv also sees this interpreter's packages",
    )
    g.add_argument("--artifacts", default="/tmp/mcp-accuracy-aiperf", help="AIPerf's artifact folders")
    g.add_argument("--json-out", help="write the rows as JSON here")
