"""Human and spreadsheet views of a result document: a compact rich table and CSV.

The table carries the reference columns (level, mean and P95 latency, throughput, GPU memory
peak %) plus what a reader needs to trust them: errors, drops, schedule lag and the SLO verdict.
GPU memory shows ``unavailable`` when no telemetry was taken, never 0.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from rich.console import Console
from rich.table import Table

from mcp_bench.results.consistency import consistency_cell
from mcp_bench.results.document import CONNECTION_METRICS, METRICS, LevelResult, ResultDocument
from mcp_bench.results.serving import serving_cell, serving_gpus
from mcp_bench.results.slo import latency_metric
from mcp_bench.results.summary import gpu_memory_peak_pct, slo_mark, summarize

UNAVAILABLE = "unavailable"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _verdict(passed: bool | None) -> str:
    return slo_mark(passed) or "-"


def summary_row(doc: ResultDocument, level: LevelResult) -> dict[str, str]:
    """One table row, formatted from the level's one summary (the operator's status uses it too)."""
    s = summarize(doc, level)
    return {
        "level": s.level,
        "mean_ms": _fmt(s.mean_ms),
        "p95_ms": _fmt(s.p95_ms),
        "p99_ms": _fmt(s.p99_ms),
        "throughput_rps": _fmt(s.throughput_rps, 1),
        "gpu_mem_peak_pct": UNAVAILABLE if s.gpu_memory_peak_pct is None else f"{s.gpu_memory_peak_pct:.1f}",
        "ok": str(s.completed),
        "errors": str(s.errors),
        "lag_p99_ms": _fmt(s.schedule_lag_p99_ms, 3),
        "slo": s.slo or "-",
    }


_HEADERS = {
    "level": "Level",
    "mean_ms": "Mean ms",
    "p95_ms": "P95 ms",
    "p99_ms": "P99 ms",
    "throughput_rps": "Throughput/s",
    "gpu_mem_peak_pct": "GPU mem peak %",
    "ok": "OK",
    "errors": "Errors",
    "lag_p99_ms": "Lag P99 ms",
    "slo": "SLO",
}


def table(doc: ResultDocument) -> Table:
    open_loop = doc.plan.levels.open_loop
    scheduled = latency_metric(doc.plan.slo, open_loop) == "e2e_from_schedule"
    basis = "latency from the scheduled send" if scheduled else "latency from the actual send"
    title = f"{doc.plan.backend} {doc.plan.url} ({basis})"
    t = Table(title=title, title_justify="left")
    keys = [k for k in _HEADERS if open_loop or k != "lag_p99_ms"]
    for k in keys:
        t.add_column(_HEADERS[k], justify="left" if k == "level" else "right")
    workers = any(level.workers or level.client_bound for level in doc.levels)
    if workers:
        t.add_column("Client", justify="left")
    consistency = any(level.consistency for level in doc.levels)
    if consistency:
        t.add_column("Consistency", justify="left")
    serving = [serving_gpus(level.server_metrics) for level in doc.levels]
    if any(s is not None for s in serving):  # the server's GPUs (DCGM, gpu-sampler), not the client's
        t.add_column("Serving GPU", justify="left")
    for level, served in zip(doc.levels, serving, strict=True):
        row = summary_row(doc, level)
        cells = [row[k] for k in keys]
        if workers:
            cells.append(client_cell(level))
        if consistency:
            cells.append(consistency_cell(level.consistency))
        if any(s is not None for s in serving):
            cells.append(serving_cell(served))
        t.add_row(*cells)
    return t


def client_cell(level: LevelResult) -> str:
    """The client's own load: its busiest worker process's CPU share (runs of several), and
    BOUND when a process passed the plan's bound (the level measured the client too)."""
    if not level.workers:
        return "BOUND" if level.client_bound else "-"
    busiest = max(w.cpu_share for w in level.workers)
    cell = f"{len(level.workers)}w cpu<={busiest:.0%}"
    return f"BOUND {cell}" if level.client_bound else cell


def print_report(doc: ResultDocument, console: Console | None = None) -> None:
    console = console or Console()
    console.print(table(doc))
    for level in doc.levels:
        errs = ", ".join(f"{k.value}={v}" for k, v in level.errors.items())
        if errs:
            console.print(f"  {level.level_label}: errors {errs}")
        for kind, detail in level.error_examples.items():
            console.print(f"    first {kind.value}: {detail}", highlight=False, markup=False)
        for reason in level.client_bound or []:
            console.print(
                f"  {level.level_label}: client-bound ({reason}): the client may be the bottleneck; "
                "spread the load over more processes (--workers)"
            )
        c = level.consistency
        if c and c.get("state") != "NotFound":
            console.print(
                f"  {level.level_label}: output consistency {c.get('state')}: {c.get('reason', '')}",
                highlight=False,
                markup=False,
            )
        served = serving_gpus(level.server_metrics)
        for why in served.unavailable if served is not None else ():
            console.print(
                f"  {level.level_label}: serving GPUs unavailable: {why}", highlight=False, markup=False
            )
        for check in level.slo.checks:
            if not check.passed:
                actual = "no data" if check.actual is None else f"{check.actual:.4g}"
                console.print(f"  {level.level_label}: SLO {check.name} missed: {actual} vs {check.target:g}")
    console.print(f"overall SLO: {_verdict(doc.slo_passed)}")


_CONSISTENCY_COLS = ("state", "probes", "compared", "mismatch_rate", "l2_max", "l2_p99")


def csv_text(doc: ResultDocument) -> str:
    """One row per level with every count, rate and percentile (ms), for spreadsheets and plots."""
    percentile_cols = ("count", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")
    header = [
        "level",
        "mode",
        "concurrency",
        "requested_rate",
        "achieved_rate",
        "sent",
        "completed",
        "failed",
        "dropped",
        "late",
        "throughput_rps",
        "output_token_throughput",
        "goodput_rps",
        "gpu_mem_peak_pct",
        "slo",
        "stop_reason",
    ]
    header += [f"{m}_{c}" for m in METRICS for c in percentile_cols]
    # connection set-up, per connection opened for the level (never in the request figures)
    header += ["connections", "new_connection_requests"]
    header += [f"{m}_{c}" for m in CONNECTION_METRICS for c in percentile_cols]
    # output consistency (plan.consistency), empty where the level was not probed
    header += [f"consistency_{k}" for k in _CONSISTENCY_COLS]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for lv in doc.levels:
        gpu = gpu_memory_peak_pct(lv.telemetry)
        row: list[Any] = [
            lv.level_label,
            lv.mode,
            lv.concurrency,
            lv.requested_rate,
            lv.achieved_rate,
            lv.sent,
            lv.completed,
            lv.failed,
            lv.dropped,
            lv.late,
            lv.throughput_rps,
            lv.output_token_throughput,
            lv.goodput_rps,
            UNAVAILABLE if gpu is None else gpu,
            _verdict(lv.slo.passed),
            lv.stop_reason,
        ]
        for m in METRICS:
            tab = lv.latency.get(m)
            row += [None if tab is None else getattr(tab, c) for c in percentile_cols]
        row += [lv.connections, lv.new_connection_requests]
        for m in CONNECTION_METRICS:
            tab = lv.latency.get(m)
            row += [None if tab is None else getattr(tab, c) for c in percentile_cols]
        row += [(lv.consistency or {}).get(k) for k in _CONSISTENCY_COLS]
        w.writerow(["" if v is None else v for v in row])
    return buf.getvalue()
