"""Charts of a result document, for people who would rather look than read.

One PNG with a panel per question: how latency grows with load (P50/P95/P99 per level, from the
merged histograms; TTFT too for LLM backends), what throughput each level reached against what
was asked, and, where telemetry was taken, GPU memory peak and SM utilisation per level. A
panel with no data says so instead of drawing zeros; a run that sampled no GPU (a CPU-only
machine) has no GPU panel, and one line says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display in pods and CI

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.typing import HashableList

from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.results.summary import gpu_field_mean, gpu_memory_peak_pct

PERCENTILES = (("p50_ms", "P50"), ("p95_ms", "P95"), ("p99_ms", "P99"))


def _latency_metric(level: LevelResult) -> str:
    """Open loop is judged from the scheduled send time (coordinated omission), closed from the actual."""
    table = level.latency.get("e2e_from_schedule")
    return "e2e_from_schedule" if level.mode == "open" and table is not None and table.count else "e2e"


def _no_data(ax: Axes, title: str, why: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _latency_panel(
    ax: Axes,
    labels: list[str],
    levels: list[LevelResult],
    metric_of: Callable[[LevelResult], str],
    title: str,
) -> None:
    plotted = False
    for key, name in PERCENTILES:
        values = [getattr(lv.latency.get(metric_of(lv)), key, None) for lv in levels]
        if any(v is not None for v in values):
            ax.plot(labels, [float("nan") if v is None else v for v in values], marker="o", label=name)
            plotted = True
    if not plotted:
        _no_data(ax, title, "not measured")
        return
    ax.set_title(title)
    ax.set_ylabel("ms")
    ax.grid(alpha=0.3)
    ax.legend()


def _throughput_panel(ax: Axes, labels: list[str], levels: list[LevelResult]) -> None:
    achieved = [lv.throughput_rps or 0.0 for lv in levels]
    ax.bar(labels, achieved, color="tab:blue", label="completed/s")
    requested = [lv.requested_rate for lv in levels]
    if any(r is not None for r in requested):
        ax.plot(
            labels,
            [float("nan") if r is None else r for r in requested],
            "k_",
            markersize=30,
            label="requested/s",
        )
    errors = [lv.failed + lv.dropped for lv in levels]
    for x, (value, failed) in enumerate(zip(achieved, errors, strict=True)):
        if failed:
            ax.annotate(f"{failed} failed/dropped", (x, value), ha="center", va="bottom", color="tab:red")
    ax.set_title("throughput")
    ax.set_ylabel("requests/s")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()


def _gpu_sampled(levels: list[LevelResult]) -> bool:
    return any(
        gpu_memory_peak_pct(lv.telemetry) is not None
        or gpu_field_mean(lv.telemetry, "sm_util_pct") is not None
        for lv in levels
    )


def _gpu_panel(ax: Axes, labels: list[str], levels: list[LevelResult]) -> None:
    memory = [gpu_memory_peak_pct(lv.telemetry) for lv in levels]
    utilisation = [gpu_field_mean(lv.telemetry, "sm_util_pct") for lv in levels]
    ax.plot(labels, [float("nan") if v is None else v for v in memory], marker="s", label="memory peak %")
    ax.plot(
        labels,
        [float("nan") if v is None else v for v in utilisation],
        marker="^",
        label="SM utilisation mean %",
    )
    ax.set_ylim(0, 105)
    ax.set_title("GPU")
    ax.set_ylabel("%")
    ax.grid(alpha=0.3)
    ax.legend()


def figure(doc: ResultDocument, url: str | None = None, no_gpu_line: bool = True) -> Figure:
    """The panels of ``doc`` (the PNG of ``mcp-bench plot``, the HTML report's overview), titled
    with ``url`` (default: the plan's); without a GPU sampled, throughput takes the GPU panel's
    place and, with ``no_gpu_line``, a line says no GPU was sampled. The caller closes it."""
    if not doc.levels:
        raise ValueError("the result has no levels to plot")
    levels = doc.levels
    labels = [lv.level_label for lv in levels]
    gpu = _gpu_sampled(levels)
    layout: list[HashableList[str]] = [["latency", "ttft"], ["throughput", "gpu" if gpu else "throughput"]]
    fig, axes = plt.subplot_mosaic(layout, figsize=(12, 8))
    _latency_panel(axes["latency"], labels, levels, _latency_metric, "end-to-end latency")
    _latency_panel(axes["ttft"], labels, levels, lambda _: "ttft", "time to first token")
    _throughput_panel(axes["throughput"], labels, levels)
    if gpu:
        _gpu_panel(axes["gpu"], labels, levels)
    elif no_gpu_line:
        fig.text(0.5, 0.005, "No GPU was sampled.", ha="center", va="bottom", color="grey")
    server = " ".join(part for part in (doc.engine.server_name, doc.engine.server_version) if part)
    fig.suptitle(f"{doc.plan.backend} {url or doc.plan.url}" + (f" ({server})" if server else ""))
    fig.tight_layout()
    return fig


def plot_result(doc: ResultDocument, path: Path) -> Path:
    """Write the chart of ``doc`` to ``path`` (PNG) and return the path."""
    fig = figure(doc)
    try:
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path
