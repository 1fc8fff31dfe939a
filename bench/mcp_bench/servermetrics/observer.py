"""Run observer that snapshots the server's metrics around each level and stores the deltas.

The ``before`` snapshot is taken when the level starts (warm-up included): the server cannot tell
warm-up requests from measured ones, so its counters cover the whole level.

Two snapshots say nothing about a gauge *during* the level (at its end the queue has drained and
the KV cache is empty again), so with ``timeline_interval_s`` the Prometheus endpoints are also
sampled during the level, for the few families the diagnosis reads (:data:`TIMELINE_METRICS`:
queue length, running requests, KV-cache usage, preemptions, per-GPU or per-instance
utilisation). Each delta then carries a ``timeline``: seconds since the level's ``before``
snapshot and one value list per series. Samples are parsed off the event loop, so the load is
not held up by a large exposition.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from mcp_bench.engines.base import RunObserver
from mcp_bench.observed import COUNTER, GAUGE
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.servermetrics.dcgm import dcgm_gpus, is_dcgm
from mcp_bench.servermetrics.names import DCGM_METRICS, MEMORY_GAUGES
from mcp_bench.servermetrics.probes import (
    PrometheusEndpointProbe,
    ServerMetricsProbe,
    deltas,
    fetch_text,
    snapshot_all,
)
from mcp_bench.servermetrics.snapshot import LabelKey, Snapshot, parse_prometheus_text

# Families sampled during a level (the rest only before and after).
TIMELINE_METRICS: frozenset[str] = frozenset(
    {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:num_preemptions",
        "nv_inference_pending_request_count",
        "nv_gpu_utilization",
        *DCGM_METRICS,
        *MEMORY_GAUGES,
    }
)
MAX_TIMELINE_SAMPLES = 600  # per level; beyond it every other sample is dropped

Sample = tuple[int, dict[str, tuple[str, dict[LabelKey, float]]]]


async def timeline_sample(probe: PrometheusEndpointProbe) -> Sample | None:
    """The timeline families of one scrape, or None when the scrape failed."""
    taken = time.perf_counter_ns()
    snap = Snapshot.now(probe.url, "prometheus_text")
    text = await fetch_text(probe.url, probe.timeout_s, snap)
    if text is None:
        return None
    try:
        snap = await asyncio.to_thread(parse_prometheus_text, text, snap)
    except (ValueError, KeyError, IndexError):
        return None
    return taken, {
        name: (fam.type, dict(fam.values))
        for name, fam in snap.families.items()
        if name in TIMELINE_METRICS and fam.type in (COUNTER, GAUGE)
    }


def build_timeline(start_ns: int, samples: Sequence[Sample]) -> dict[str, Any]:
    """``t_s`` (since ``start_ns``) and, per family, one value list per label set (None: absent)."""
    metrics: dict[str, dict[str, Any]] = {}
    keys: dict[str, set[LabelKey]] = {}
    for _, families in samples:
        for name, (kind, values) in families.items():
            metrics.setdefault(name, {"type": kind})
            keys.setdefault(name, set()).update(values)
    for name, labelsets in keys.items():
        metrics[name]["series"] = [
            {"labels": dict(key), "values": [fams.get(name, ("", {}))[1].get(key) for _, fams in samples]}
            for key in sorted(labelsets)
        ]
    return {"t_s": [(t - start_ns) / 1e9 for t, _ in samples], "metrics": metrics}


class ServerMetricsObserver(RunObserver):
    """Fills ``level.server_metrics`` with one delta per probe, keyed by probe name."""

    def __init__(
        self, probes: Sequence[ServerMetricsProbe], timeline_interval_s: float | None = None
    ) -> None:
        names = [p.name for p in probes]
        if len(set(names)) != len(names):
            raise ValueError(f"server metrics probes need distinct names, got {names}")
        if timeline_interval_s is not None and timeline_interval_s <= 0:
            raise ValueError(f"timeline interval must be > 0, got {timeline_interval_s}")
        self.probes = list(probes)
        self.timeline_interval_s = timeline_interval_s
        self._before: list[Snapshot] | None = None
        self._samples: dict[str, list[Sample]] = {}
        self._sampler: asyncio.Task[None] | None = None

    def _timeline_probes(self) -> list[PrometheusEndpointProbe]:
        return [p for p in self.probes if isinstance(p, PrometheusEndpointProbe)]

    async def _sample_forever(self, interval_s: float) -> None:
        probes = self._timeline_probes()
        while True:
            await asyncio.sleep(interval_s)
            taken = await asyncio.gather(*(timeline_sample(p) for p in probes))
            for probe, sample in zip(probes, taken, strict=True):
                if sample is None:
                    continue
                kept = self._samples.setdefault(probe.name, [])
                kept.append(sample)
                if len(kept) > MAX_TIMELINE_SAMPLES:
                    del kept[1::2]

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self._before = await snapshot_all(self.probes)
        self._samples = {}
        if self.timeline_interval_s is not None and self._timeline_probes():
            self._sampler = asyncio.create_task(self._sample_forever(self.timeline_interval_s))

    async def _stop_sampler(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        await self._stop_sampler()
        if self._before is None:
            return
        after = await snapshot_all(self.probes)
        result.server_metrics = {**(result.server_metrics or {}), **deltas(self.probes, self._before, after)}
        if self.timeline_interval_s is not None:
            for probe, before, end in zip(self.probes, self._before, after, strict=True):
                delta = result.server_metrics[probe.name]
                if not isinstance(probe, PrometheusEndpointProbe) or delta.get("status") != "ok":
                    continue
                edges = [_edge(s) for s in (before, end)]
                samples = [edges[0], *self._samples.get(probe.name, []), edges[1]]
                delta["timeline"] = build_timeline(before.taken_ns, samples)
        for delta in result.server_metrics.values():
            if isinstance(delta, dict) and delta.get("status") == "ok" and is_dcgm(delta):
                delta["gpus"] = dcgm_gpus(delta)  # the serving GPUs, one entry each
        self._before = None
        self._samples = {}

    async def level_settled(self, plan: RunPlan, result: LevelResult) -> None:
        """The memory gauges once more, after the settle wait: ``settled`` in each endpoint's delta."""
        if not isinstance(result.server_metrics, dict):
            return
        settled = await snapshot_all(self.probes)
        for probe, snap in zip(self.probes, settled, strict=True):
            delta = result.server_metrics.get(probe.name)
            if not isinstance(probe, PrometheusEndpointProbe) or not snap.ok:
                continue
            if not isinstance(delta, dict) or delta.get("status") != "ok":
                continue
            delta["settled"] = {
                "settle_s": plan.observe.settle_s,
                "metrics": {
                    name: [{"labels": dict(key), "value": value} for key, value in fam.values.items()]
                    for name, fam in snap.families.items()
                    if name in MEMORY_GAUGES
                },
            }

    async def run_finished(self, doc: ResultDocument) -> None:
        await self._stop_sampler()


def _edge(snapshot: Snapshot) -> Sample:
    return snapshot.taken_ns, {
        name: (fam.type, dict(fam.values))
        for name, fam in snapshot.families.items()
        if name in TIMELINE_METRICS and fam.type in (COUNTER, GAUGE)
    }
