"""The report's charts as PNG data URIs, so the HTML file stands alone (no files beside it).

The per-level overview is ``mcp-bench plot``'s figure; this adds the schedule lag per level (open
loop) and the GPU telemetry over the run from the document's plot points (one shard's series, or
every shard's after a merge). Where there is nothing to draw, no chart: the page says why.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mcp_bench.plot import figure as overview_figure
from mcp_bench.results.document import ResultDocument
from mcp_common.redact import redact_url

# (field in the plot points, axis label, scale applied to the value)
TELEMETRY_PANELS = (
    ("sm_util_pct", "SM utilisation %", 1.0),
    ("mem_used_bytes", "memory used GiB", 1 / 2**30),
    ("power_w", "power W", 1.0),
)


def data_uri(fig: Figure) -> str:
    """The figure as an inline PNG; the figure is closed."""
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=90)
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def overview(doc: ResultDocument) -> str | None:
    """Latency percentiles, TTFT, throughput and GPU per level (the page's note says when no GPU
    was sampled)."""
    return data_uri(overview_figure(doc, redact_url(doc.plan.url), no_gpu_line=False)) if doc.levels else None


def schedule_lag(doc: ResultDocument) -> str | None:
    """Schedule lag P50/P99/max per level; open loop only (closed loop has no schedule)."""
    if not doc.plan.levels.open_loop or not doc.levels:
        return None
    labels = [lv.level_label for lv in doc.levels]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for key, name in (("p50_ms", "P50"), ("p99_ms", "P99"), ("max_ms", "max")):
        values = [getattr(lv.latency.get("schedule_lag"), key, None) for lv in doc.levels]
        ax.plot(labels, [float("nan") if v is None else v for v in values], marker="o", label=name)
    ax.set_title("schedule lag (actual send - scheduled send)")
    ax.set_ylabel("ms")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return data_uri(fig)


def _series(plot: Mapping[str, Any]) -> Iterator[tuple[str, Sequence[Any], Mapping[str, Any]]]:
    """(label, times, one GPU's series) for a run's plot, merged (``series`` per shard) or not."""
    parts = plot.get("series") if isinstance(plot.get("series"), list) else [plot]
    for part in parts or []:
        shard = part.get("shard")
        for gpu in part.get("gpus") or []:
            label = f"GPU {gpu.get('index')}" if shard is None else f"shard {shard} GPU {gpu.get('index')}"
            yield label, part.get("t_s") or [], gpu


def telemetry_over_time(doc: ResultDocument) -> str | None:
    """SM utilisation, memory and power of every GPU over the run, from the document's plot."""
    tel = doc.telemetry
    plot = tel.get("plot") if isinstance(tel, dict) else None
    if not isinstance(plot, Mapping) or plot.get("status", "ok") != "ok":
        return None
    series = list(_series(plot))
    if not any(len(t) > 1 for _, t, _ in series):
        return None
    fig, axes = plt.subplots(len(TELEMETRY_PANELS), 1, figsize=(10, 7), sharex=True)
    for ax, (name, label, scale) in zip(axes, TELEMETRY_PANELS, strict=True):
        drawn = False
        for gpu_label, t_s, gpu in series:
            values = gpu.get(name)
            if isinstance(values, list) and any(v is not None for v in values):
                ax.plot(t_s, [float("nan") if v is None else v * scale for v in values], label=gpu_label)
                drawn = True
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if not drawn:
            ax.text(0.5, 0.5, "not sampled", ha="center", va="center", transform=ax.transAxes, color="grey")
        elif 1 < len(series) <= 8:  # beyond that a legend hides the lines
            ax.legend(fontsize="small")
    axes[-1].set_xlabel("seconds since the first sample")
    fig.suptitle("GPU telemetry over the run")
    fig.tight_layout()
    return data_uri(fig)
