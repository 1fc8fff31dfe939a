"""One typed summary per level: the figures every view shows (CLI table, CSV, charts, the
operator's status rows), computed once so they cannot disagree.

``errors`` counts every request that was offered and did not complete: failed plus dropped,
the same count the error-rate SLO judges. Latency is the one the SLO judges: from the
scheduled send in open loop (coordinated omission), from the actual send otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_bench.results.consistency import consistency_cell
from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.results.serverfigures import level_figures
from mcp_bench.results.serving import ServingGpus, serving_gpus
from mcp_bench.results.slo import latency_metric

SloMark = Literal["Pass", "Fail"]


def gpu_memory_peak_pct(telemetry: dict[str, Any] | str | None) -> float | None:
    """Highest ``memory_used_peak_pct`` over GPUs (and shards) in a telemetry summary, if any."""
    if not isinstance(telemetry, dict):
        return None
    if "shards" in telemetry and isinstance(telemetry["shards"], list):
        values = [gpu_memory_peak_pct(s) for s in telemetry["shards"]]
        real = [v for v in values if v is not None]
        return max(real) if real else None
    if telemetry.get("status", "ok") != "ok":
        return None
    peaks: list[float] = []
    for gpu in telemetry.get("gpus", []):
        value = gpu.get("memory_used_peak_pct") if isinstance(gpu, dict) else None
        if isinstance(value, int | float):
            peaks.append(float(value))
    return max(peaks) if peaks else None


def gpu_field_mean(telemetry: dict[str, Any] | str | None, field: str) -> float | None:
    """Mean of one sampled field (``sm_util_pct``, ``power_w``) over the GPUs of a level summary,
    or None where no GPU has it: an unsupported field is never read as 0."""
    if not isinstance(telemetry, dict) or telemetry.get("status", "ok") != "ok":
        return None
    means: list[float] = []
    for gpu in telemetry.get("gpus", []):
        entry = (gpu.get("fields") or {}).get(field) if isinstance(gpu, dict) else None
        mean = entry.get("mean") if isinstance(entry, dict) else None
        if isinstance(mean, int | float):
            means.append(float(mean))
    return sum(means) / len(means) if means else None


def slo_mark(passed: bool | None) -> SloMark | None:
    """The SLO verdict of a level or run in the spelling of every view: Pass, Fail, or None."""
    return None if passed is None else ("Pass" if passed else "Fail")


@dataclass(frozen=True)
class LevelSummary:
    level: str
    latency_basis: str  # the latency metric shown: e2e_from_schedule or e2e
    mean_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    throughput_rps: float | None
    gpu_memory_peak_pct: float | None
    completed: int
    failed: int
    dropped: int
    schedule_lag_p99_ms: float | None
    slo: SloMark | None
    # the server's GPUs (DCGM exporter, node-level samplers); None where none was observed
    serving: ServingGpus | None = None
    # the server's side over the level, one figure per probe and metric (results.serverfigures)
    server_figures: dict[str, str] = field(default_factory=dict)
    # output consistency in one cell (state, mismatch rate, L2 max); None where it was not probed
    consistency: str | None = None

    @property
    def errors(self) -> int:
        """Offered and not completed: failed plus dropped, as the error-rate SLO counts them."""
        return self.failed + self.dropped


def summarize(doc: ResultDocument, level: LevelResult) -> LevelSummary:
    basis = latency_metric(doc.plan.slo, level.mode == "open")
    lat = level.latency.get(basis)
    if lat is None or not lat.count:
        basis, lat = "e2e", level.latency.get("e2e")
    lag = level.latency.get("schedule_lag")
    return LevelSummary(
        level=level.level_label,
        latency_basis=basis,
        mean_ms=lat.mean_ms if lat else None,
        p50_ms=lat.p50_ms if lat else None,
        p95_ms=lat.p95_ms if lat else None,
        p99_ms=lat.p99_ms if lat else None,
        throughput_rps=level.throughput_rps,
        gpu_memory_peak_pct=gpu_memory_peak_pct(level.telemetry),
        completed=level.completed,
        failed=level.failed,
        dropped=level.dropped,
        schedule_lag_p99_ms=lag.p99_ms if lag and lag.count else None,
        slo=slo_mark(level.slo.passed),
        serving=serving_gpus(level.server_metrics),
        server_figures=level_figures(level.server_metrics),
        consistency=None if level.consistency is None else consistency_cell(level.consistency),
    )
