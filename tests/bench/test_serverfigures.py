"""A level's server-side deltas in one figure per metric (the status rows' serverMetrics), from
snapshots of real prometheus_client exposition text."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mcp_bench.records import ErrorKind
from mcp_bench.results.serverfigures import level_figures
from mcp_bench.servermetrics.delta import delta
from mcp_bench.servermetrics.snapshot import Snapshot, parse_prometheus_text


def _snap(registry: CollectorRegistry, taken_ns: int) -> Snapshot:
    snap = Snapshot("test", "prometheus_text", taken_ns, "2026-01-01T00:00:00+00:00")
    return parse_prometheus_text(generate_latest(registry).decode(), snap)


def test_each_metric_gets_its_level_figure_summed_over_label_sets() -> None:
    reg = CollectorRegistry()
    requests = Counter("app_requests", "requests", ["code"], registry=reg)
    queue = Gauge("app_queue", "queued", ["gpu"], registry=reg)
    latency = Histogram("app_latency_seconds", "lat", buckets=(0.1, 0.2, 0.4), registry=reg)
    requests.labels("200").inc(10)
    queue.labels("0").set(3)
    before = _snap(reg, 0)
    requests.labels("200").inc(90)
    requests.labels("500").inc(2)
    queue.labels("0").set(1)
    queue.labels("1").set(7)
    for v in (0.1, 0.3):
        latency.observe(v)
    after = _snap(reg, 10**9)
    figures = level_figures({"app": delta(before, after, ["app_missing"])})
    assert figures["app/app_requests_total"] == "+92"  # 90 more on code 200, 2 on a new label set
    assert figures["app/app_queue"] == "max 7"  # the largest reading of any label set
    assert figures["app/app_latency_seconds"] == "n 2, mean 0.2"
    assert figures["app/app_missing"] == "missing"  # asked for, not served: never a zero


def test_an_unreadable_source_says_so_and_the_samplers_are_left_to_their_own_columns() -> None:
    reg = CollectorRegistry()
    ok = _snap(reg, 0)
    failed = Snapshot("down", "prometheus_text", 0, "2026-01-01T00:00:00+00:00")
    failed.failed(ErrorKind.CONNECT, "GET http://down/metrics: refused")
    figures = level_figures(
        {
            "down": delta(failed, ok),
            "gpu-sampler:node-a": {"status": "unavailable", "reason": "no NVML"},
        }
    )
    assert figures.keys() == {"down"}
    assert figures["down"].startswith("unavailable: before: ") and "refused" in figures["down"]
    assert level_figures(None) == {}


@pytest.mark.parametrize("status", ["vanished", "type_changed"])
def test_a_metric_without_a_level_figure_is_left_out(status: str) -> None:
    assert level_figures({"p": {"status": "ok", "metrics": {"m": {"status": status}}}}) == {}
