"""Reading a result document's levels the way the detectors need them.

Server metrics of a level are ``{probe name: delta}`` (see :mod:`mcp_bench.servermetrics`), in a
merged document too (``results.merge`` keeps one delta per probe); documents merged before that
hold ``{"shards": [{probe: delta}, ...]}``. Every shard watched the same server during the same
level, so each shard's delta is the server's whole view of it: the first usable one per probe is
taken, never a sum (which would count the server's requests once per shard).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp_bench.results.document import LevelResult, PercentileTable, ResultDocument, TagResult
from mcp_bench.results.slo import latency_metric


def probe_deltas(level: LevelResult) -> dict[str, dict[str, Any]]:
    """Usable (status ok) deltas of the level by probe name, the first shard's that has one."""
    sm = level.server_metrics
    if not isinstance(sm, dict):
        return {}
    parts = sm["shards"] if isinstance(sm.get("shards"), list) else [sm]
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        if not isinstance(part, dict):
            continue
        for name, delta in part.items():
            if isinstance(delta, dict) and delta.get("status") == "ok" and name not in out:
                out[name] = delta
    return out


def metric(delta: dict[str, Any], name: str) -> dict[str, Any] | None:
    m = delta.get("metrics", {}).get(name)
    return m if isinstance(m, dict) and m.get("status") == "ok" else None


def counter_total(delta: dict[str, Any], *names: str) -> float | None:
    """The summed delta of the first of ``names`` the server exposed."""
    for name in names:
        m = metric(delta, name)
        if m is not None and m.get("type") == "counter" and m.get("total_delta") is not None:
            return float(m["total_delta"])
    return None


def counter_series(delta: dict[str, Any], name: str) -> list[tuple[dict[str, str], float]]:
    m = metric(delta, name)
    if m is None:
        return []
    return [(s["labels"], float(s["delta"])) for s in m.get("series", []) if s.get("delta") is not None]


def gauge_series(delta: dict[str, Any], name: str) -> list[dict[str, Any]]:
    m = metric(delta, name)
    return [] if m is None else list(m.get("series", []))


def timeline(delta: dict[str, Any], name: str) -> tuple[list[float], list[dict[str, Any]]] | None:
    """(seconds since the level's start, series with ``labels`` and ``values``) of a family the
    observer sampled during the level; None when there is no timeline for it."""
    tl = delta.get("timeline")
    if not isinstance(tl, dict):
        return None
    fam = tl.get("metrics", {}).get(name)
    if not isinstance(fam, dict):
        return None
    return list(tl.get("t_s", [])), list(fam.get("series", []))


def timeline_sum(delta: dict[str, Any], *names: str) -> tuple[list[float], list[float | None]] | None:
    """Per sample, the sum over label sets of the first of ``names`` sampled (None: no reading)."""
    for name in names:
        found = timeline(delta, name)
        if found is None:
            continue
        t_s, series = found
        sums: list[float | None] = []
        for i in range(len(t_s)):
            vals = [s["values"][i] for s in series if i < len(s["values"]) and s["values"][i] is not None]
            sums.append(math.fsum(vals) if vals else None)
        return t_s, sums
    return None


def levels(doc: ResultDocument) -> list[LevelResult]:
    return list(doc.levels)


def load_of(level: LevelResult) -> float:
    """The level's offered load, for ordering levels: concurrency or requested rate."""
    return float(level.concurrency if level.concurrency is not None else level.requested_rate or 0.0)


def latency_name(doc: ResultDocument, level: LevelResult) -> str:
    """The latency the SLO judges: from the scheduled send in open loop, the actual one otherwise."""
    return latency_metric(doc.plan.slo, level.mode == "open")


def tag_table(tag: TagResult, metric: str) -> PercentileTable | None:
    table = tag.latency.get(metric) or tag.latency.get("e2e")
    return table if table is not None and table.count else None


def breakdown(level: LevelResult, key: str) -> dict[str, TagResult]:
    return dict((level.breakdown or {}).get(key, {}))


@dataclass(frozen=True)
class TritonModelLevel:
    """Triton's view of one model over one level: totals in microseconds, counts, the interval."""

    model: str
    source: str
    requests: float
    request_us: float | None
    queue_us: float
    input_us: float | None
    infer_us: float
    output_us: float | None
    inferences: float | None
    executions: float | None
    interval_s: float

    def mean_us(self, total: float | None) -> float | None:
        return None if total is None or self.requests <= 0 else total / self.requests

    @property
    def batch_size(self) -> float | None:
        if not self.inferences or not self.executions:
            return None
        return self.inferences / self.executions

    @property
    def busy_fraction(self) -> float | None:
        """Execution time over the interval: compute per request, counted once per execution
        (Triton gives every request of a batch the batch's compute time)."""
        if self.interval_s <= 0 or self.requests <= 0:
            return None
        compute = self.infer_us + (self.input_us or 0.0) + (self.output_us or 0.0)
        per_exec = 1.0 / self.batch_size if self.batch_size else 1.0
        return compute * per_exec / 1e6 / self.interval_s


def _stats_models(name: str, delta: dict[str, Any]) -> Iterator[TritonModelLevel]:
    stages = delta.get("stages")
    if not isinstance(stages, dict):
        return
    counts = {
        kind: {
            f"{labels.get('model', '')}/{labels.get('version', '')}": value
            for labels, value in counter_series(delta, f"triton_stats:{kind}_count")
        }
        for kind in ("inference", "execution")
    }
    for model, st in stages.items():
        success = st.get("success") or {}
        if not success.get("count"):
            continue

        def total_us(stage: str, st: dict[str, Any] = st) -> float | None:
            fig = st.get(stage)
            return None if not fig or fig.get("total_ms") is None else fig["total_ms"] * 1e3

        yield TritonModelLevel(
            model=model,
            source=name,
            requests=float(success["count"]),
            request_us=total_us("success"),
            queue_us=total_us("queue") or 0.0,
            input_us=total_us("compute_input"),
            infer_us=total_us("compute_infer") or 0.0,
            output_us=total_us("compute_output"),
            inferences=counts["inference"].get(model),
            executions=counts["execution"].get(model),
            interval_s=float(delta.get("interval_s") or 0.0),
        )


def _metrics_models(name: str, delta: dict[str, Any]) -> Iterator[TritonModelLevel]:
    success = counter_series(delta, "nv_inference_request_success")
    if not success:
        return

    def by_model(metric_name: str) -> dict[str, float]:
        return {
            f"{labels.get('model', '')}/{labels.get('version', '')}": value
            for labels, value in counter_series(delta, metric_name)
        }

    figures = {
        n: by_model(n)
        for n in (
            "nv_inference_request_duration_us",
            "nv_inference_queue_duration_us",
            "nv_inference_compute_input_duration_us",
            "nv_inference_compute_infer_duration_us",
            "nv_inference_compute_output_duration_us",
            "nv_inference_count",
            "nv_inference_exec_count",
        )
    }
    for labels, count in success:
        if count <= 0:
            continue
        model = f"{labels.get('model', '')}/{labels.get('version', '')}"
        f = {n: v.get(model) for n, v in figures.items()}
        yield TritonModelLevel(
            model=model,
            source=name,
            requests=count,
            request_us=f["nv_inference_request_duration_us"],
            queue_us=f["nv_inference_queue_duration_us"] or 0.0,
            input_us=f["nv_inference_compute_input_duration_us"],
            infer_us=f["nv_inference_compute_infer_duration_us"] or 0.0,
            output_us=f["nv_inference_compute_output_duration_us"],
            inferences=f["nv_inference_count"],
            executions=f["nv_inference_exec_count"],
            interval_s=float(delta.get("interval_s") or 0.0),
        )


def triton_models(level: LevelResult) -> list[TritonModelLevel]:
    """Triton's per-model figures for the level: from the statistics extension when the run read
    it, else from Triton's /metrics counters."""
    deltas = probe_deltas(level)
    stats = [
        m for name, d in deltas.items() if d.get("kind") == "triton_stats" for m in _stats_models(name, d)
    ]
    if stats:
        return stats
    return [
        m for name, d in deltas.items() if d.get("kind") != "triton_stats" for m in _metrics_models(name, d)
    ]


def telemetry_gpus(level: LevelResult) -> list[dict[str, Any]]:
    """The per-GPU telemetry summaries of a level (every shard's), empty when unavailable."""
    tel = level.telemetry
    if not isinstance(tel, dict):
        return []
    parts = tel["shards"] if isinstance(tel.get("shards"), list) else [tel]
    return [g for p in parts if isinstance(p, dict) and p.get("status") == "ok" for g in p.get("gpus", [])]


def gpu_field(gpu: dict[str, Any], name: str, stat: str = "mean") -> float | None:
    f = gpu.get("fields", {}).get(name)
    if not isinstance(f, dict) or f.get("status") != "ok":
        return None
    value = f.get(stat)
    return float(value) if isinstance(value, int | float) else None
