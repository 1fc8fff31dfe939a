"""Accuracy: does mcp-bench report the latencies a server really had?

Starts the reference server (``python -m mcp_refserver``) in its own process with a known
latency model, drives it with the built-in engine and the OpenAI streaming backend in open loop
(Poisson arrivals) at each requested rate, and prints the reported P50 / P99 of TTFT, TPOT and
end-to-end latency next to two truths:

* model: the configured latency model (TTFT = ttft, TPOT = tpot, e2e = ttft + (n - 1) * tpot);
* server: what the server itself measured for the same requests (``/debug/timings``: request
  arrival to first / last token write), i.e. the model plus the server's own timer overshoot.

The target is |reported - truth| <= max(1 ms, 2 % of truth). The difference to the server's
figure is the client's own measurement error (loopback, both sides' Python, and any CPU
contention between the two processes); the difference to the model adds the server's error.

    .venv/bin/python measurements/accuracy.py                       # 10 and 1000 req/s
    .venv/bin/python measurements/accuracy.py --rates 10,1000 --ttft-ms 20 --tpot-ms 5 --tokens 8
    .venv/bin/python measurements/accuracy.py --rates 10 --http-client aiohttp   # the aiohttp client
    .venv/bin/python measurements/accuracy.py --concurrency 64 --connections warm,cold,per-request
    .venv/bin/python measurements/accuracy.py --concurrency 256 --connections warm --workers 1,2
    .venv/bin/python measurements/accuracy.py --side-by-side --levels 8,64,256,512 --server-procs 2

With ``--connections``, closed loop at ``--concurrency`` once per connection mode, side by side:
TTFT P50 / P99 reported and as the server measured them, the connect time per connection, and
how many measured requests waited for a new connection (whose connect time is in their TTFT).
``--workers 1,2`` runs each rate or mode once per client process count (plan ``workers``) and
adds the busiest worker's CPU share of a core and whether the level was flagged client-bound.

``--side-by-side`` runs the reference server as ``--server-procs`` processes on one port, and
mcp-bench and AIPerf (pinned, in its own venv, made on first use) one after the other at each
closed-loop ``--levels`` concurrency, and prints each tool's error against the server's truth at
P50 and P99 for TTFT, ITL, TPOT and e2e, with the server's own lateness beside them (see
``side_by_side.py``; ``--json-out`` keeps the rows).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.request
from typing import Any

import numpy as np
import side_by_side

from mcp_bench.engines import run_plan_sync
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import LevelResult


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "mcp_refserver",
        "--port",
        "0",
        "--ttft-ms",
        str(args.ttft_ms),
        "--tpot-ms",
        str(args.tpot_ms),
        "--default-max-tokens",
        str(args.tokens),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise SystemExit(f"refserver did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line)}"


def server_timings(url: str, reset: bool = True) -> dict[str, list[float]]:
    with urllib.request.urlopen(f"{url}/debug/timings?reset={int(reset)}", timeout=30) as r:
        data: dict[str, list[float]] = json.loads(r.read())
    return data


def plan_for(
    url: str, rate: float, seconds: float, tokens: int, http_client: str, workers: int = 1
) -> RunPlan:
    return RunPlan.model_validate(
        {
            "url": url,
            "workers": workers,
            "backend": "openai",
            "http_client": http_client,
            "model": "refmodel",
            "levels": {"rate": [rate], "arrival": "poisson", "seed": 1, "max_concurrency": 900},
            "stage": {"duration_s": seconds},
            "request_timeout_s": 30,
            "payload": {"prompt": "one two three four", "max_output_tokens": tokens, "stream": True},
        }
    )


def closed_plan(url: str, args: argparse.Namespace, mode: str, seconds: float, workers: int = 1) -> RunPlan:
    return RunPlan.model_validate(
        {
            "url": url,
            "workers": workers,
            "backend": "openai",
            "http_client": args.http_client,
            "model": "refmodel",
            "levels": {"concurrency": [args.concurrency], "connections": mode, "ramp_s": args.ramp},
            "stage": {"duration_s": seconds},
            "request_timeout_s": 30,
            "payload": {"prompt": "one two three four", "max_output_tokens": args.tokens, "stream": True},
        }
    )


def compare_connections(url: str, args: argparse.Namespace) -> None:
    """One closed-loop run per connection mode, each on a new client (so nothing is open before
    it), and one line each: what the client reported beside what the server measured."""
    seconds = args.seconds or 5.0
    print(
        f"\nclosed loop, concurrency {args.concurrency}, ramp {args.ramp:g} s, {seconds:g} s per mode "
        "(TTFT and connect in ms; 'new conn' = measured requests that waited for a connection)"
    )
    head = (
        "mode",
        "workers",
        "TTFT p50",
        "TTFT p99",
        "server p50",
        "server p99",
        "err p99",
        "connects",
        "conn p50",
        "conn p99",
        "new conn",
        "cpu max",
    )
    print(" ".join(f"{h:>11}" for h in head))
    for mode, workers in ((m, w) for m in args.connections.split(",") for w in worker_counts(args)):
        server_timings(url, reset=True)
        level = run_plan_sync(closed_plan(url, args, mode, seconds, workers)).levels[0]
        truth = [v for v in server_timings(url, reset=True)["ttft_ms"] if v is not None]
        ttft, conn = level.latency["ttft"], level.latency["connect"]
        p50, p99 = (float(np.percentile(truth, q)) if truth else float("nan") for q in (50, 99))
        cells = (ttft.p50_ms, ttft.p99_ms, p50, p99, None if ttft.p99_ms is None else ttft.p99_ms - p99)
        row = [f"{mode:>11}", f"{workers:11d}"] + [f"{float('nan') if v is None else v:11.3f}" for v in cells]
        row += [f"{conn.count:11d}"] + [
            f"{float('nan') if v is None else v:11.3f}" for v in (conn.p50_ms, conn.p99_ms)
        ]
        row += [f"{level.new_connection_requests:11d}", f"{client_cpu(level):>11}"]
        print(" ".join(row) + f"   ({level.completed} requests, {level.failed} failed){bound_note(level)}")


def worker_counts(args: argparse.Namespace) -> list[int]:
    return [int(w) for w in args.workers.split(",")]


def client_cpu(level: LevelResult) -> str:
    """The busiest client process's CPU share of a core (measured with several workers only)."""
    return "-" if not level.workers else f"{max(w.cpu_share for w in level.workers):.0%}"


def bound_note(level: LevelResult) -> str:
    return f"  CLIENT-BOUND: {'; '.join(level.client_bound)}" if level.client_bound else ""


def within(reported: float | None, truth: float) -> str:
    if reported is None:
        return "NO DATA"
    return "ok" if abs(reported - truth) <= max(1.0, 0.02 * truth) else "MISS"


def report(
    rate: float, level: LevelResult, truth_server: dict[str, list[float]], args: argparse.Namespace
) -> bool:
    model = {
        "ttft": args.ttft_ms,
        "tpot": args.tpot_ms,
        "e2e": args.ttft_ms + (args.tokens - 1) * args.tpot_ms,
    }
    lag = level.latency.get("schedule_lag")
    print(
        f"\nrate {rate:g}/s: achieved {level.achieved_rate or 0:.1f}/s, sent {level.sent}, completed "
        f"{level.completed}, failed {level.failed} {dict(level.errors) or ''}, late {level.late}, "
        f"schedule lag p99 {lag.p99_ms if lag and lag.p99_ms is not None else float('nan'):.3f} ms"
    )
    widths = ((6, "<"), (4, ">"), (9, ">"), (8, ">"), (8, ">"), (9, ">"), (9, ">"))
    head = ("metric", "pct", "reported", "model", "server", "vs model", "vs server")
    print(" ".join(f"{h:{a}{w}}" for h, (w, a) in zip(head, widths, strict=True)) + "  verdict")
    good = True
    for metric in ("ttft", "tpot", "e2e"):
        table = level.latency.get(metric)
        values = [v for v in truth_server[f"{metric}_ms"] if v is not None]
        for pct in (50, 99):
            reported = None if table is None else getattr(table, f"p{pct}_ms")
            server = float(np.percentile(values, pct)) if values else float("nan")
            verdict = f"model {within(reported, model[metric])}, server {within(reported, server)}"
            good &= "ok" in verdict.split(",")[0]
            r = float("nan") if reported is None else reported
            print(
                f"{metric:6} {'p' + str(pct):>4} {r:9.3f} {model[metric]:8.3f} {server:8.3f} "
                f"{r - model[metric]:+9.3f} {r - server:+9.3f}  {verdict}"
            )
    return good


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="10,1000", help="open-loop request rates, comma separated")
    ap.add_argument("--seconds", type=float, default=0.0, help="measured seconds per rate (default: auto)")
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--tpot-ms", type=float, default=5.0)
    ap.add_argument("--tokens", type=int, default=8, help="output tokens per request")
    ap.add_argument(
        "--http-client",
        choices=("fast", "aiohttp"),
        default="fast",
        help="the OpenAI client (plan http_client)",
    )
    ap.add_argument(
        "--connections",
        help="compare connection modes (e.g. warm,cold,per-request) in closed loop at --concurrency",
    )
    ap.add_argument("--concurrency", type=int, default=64, help="closed-loop concurrency for --connections")
    ap.add_argument("--workers", default="1", help="client processes per run, comma separated (e.g. 1,2)")
    ap.add_argument(
        "--ramp", type=float, default=0.0, help="seconds over which the workers start (--connections)"
    )
    ap.add_argument("--side-by-side", action="store_true", help="mcp-bench and AIPerf at --levels")
    side_by_side.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.side_by_side:
        args.seconds = args.seconds or 5.0
        return side_by_side.run(args)
    rates = [float(r) for r in args.rates.split(",")]
    proc, url = start_server(args)
    ok = True
    if args.connections:
        try:
            compare_connections(url, args)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        return 0
    try:
        print(
            f"refserver at {url} (own process, select loop): ttft {args.ttft_ms} ms, tpot {args.tpot_ms} ms, "
            f"{args.tokens} tokens; client: built-in engine, backend openai (streaming, {args.http_client} "
            "client), Poisson arrivals"
        )
        for rate, workers in ((r, w) for r in rates for w in worker_counts(args)):
            seconds = args.seconds or (20.0 if rate < 100 else 5.0)
            run_plan_sync(
                plan_for(url, rate, min(1.0, seconds), args.tokens, args.http_client, workers)
            )  # warm-up, not measured
            server_timings(url, reset=True)
            doc = run_plan_sync(plan_for(url, rate, seconds, args.tokens, args.http_client, workers))
            truth: dict[str, Any] = server_timings(url, reset=True)
            level = doc.levels[0]
            print(f"\nworkers {workers}: client CPU max {client_cpu(level)}{bound_note(level)}")
            ok &= report(rate, level, truth, args)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print("\nall within target (vs model)" if ok else "\nsome figures MISS the target (vs model)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
