"""Deltas between snapshots parsed from real prometheus_client exposition text."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mcp_bench.records import ErrorKind
from mcp_bench.servermetrics.delta import delta, histogram_quantile
from mcp_bench.servermetrics.snapshot import Snapshot, parse_prometheus_text
from mcp_bench.servermetrics.triton_stats import parse_triton_stats, stage_means

INF = float("inf")


def _snap(registry: CollectorRegistry, taken_ns: int) -> Snapshot:
    snap = Snapshot("test", "prometheus_text", taken_ns, "2026-01-01T00:00:00+00:00")
    return parse_prometheus_text(generate_latest(registry).decode(), snap)


class Server:
    """A registry shaped like an inference server's: a counter, a gauge and a latency histogram."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("app_requests", "requests", ["code"], registry=self.registry)
        self.queue = Gauge("app_queue", "queued", registry=self.registry)
        self.latency = Histogram(
            "app_latency_seconds", "lat", buckets=(0.1, 0.2, 0.4), registry=self.registry
        )


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = ((1.0, 2.0), (2.0, 6.0), (4.0, 10.0), (INF, 10.0))
    assert histogram_quantile(0.5, buckets) == pytest.approx(1.75)  # rank 5 in (1, 2]: 1 + 1 * 3/4
    assert histogram_quantile(0.1, buckets) == pytest.approx(0.5)  # rank 1 in (0, 1]
    assert histogram_quantile(1.0, buckets) == pytest.approx(4.0)
    assert histogram_quantile(0.9, ((1.0, 2.0), (INF, 4.0))) == 1.0  # rank in +Inf: largest finite bound
    assert histogram_quantile(0.5, ((1.0, 0.0), (INF, 0.0))) is None  # no observations, no quantile
    with pytest.raises(ValueError):
        histogram_quantile(1.5, buckets)


def test_counter_gauge_and_histogram_deltas() -> None:
    server = Server()
    server.requests.labels("200").inc(3)
    server.queue.set(5)
    server.latency.observe(0.05)
    before = _snap(server.registry, 1_000_000_000)
    server.requests.labels("200").inc(4)
    server.requests.labels("500").inc(2)  # a label set that appears during the level
    server.queue.set(2)
    for value in (0.15, 0.15, 0.3, 0.3, 0.3, 0.3, 0.5, 0.05):
        server.latency.observe(value)
    after = _snap(server.registry, 3_000_000_000)

    out = delta(before, after, expected=("app_requests_total", "not_there"))
    assert out["status"] == "ok"
    assert out["interval_s"] == 2.0
    requests = out["metrics"]["app_requests_total"]
    by_code = {s["labels"]["code"]: s for s in requests["series"]}
    assert by_code["200"]["delta"] == 4.0 and by_code["200"]["rate_per_s"] == 2.0
    assert by_code["500"]["delta"] == 2.0 and by_code["500"]["status"] == "appeared"
    assert requests["total_delta"] == 6.0
    queue = out["metrics"]["app_queue"]["series"][0]
    assert (queue["before"], queue["after"], queue["max"]) == (5.0, 2.0, 5.0)
    lat = out["metrics"]["app_latency_seconds"]["series"][0]
    assert lat["count"] == 8.0
    assert lat["sum"] == pytest.approx(2.05)
    assert lat["mean"] == pytest.approx(2.05 / 8)
    # delta buckets: <=0.1: 1, <=0.2: 3, <=0.4: 7, +Inf: 8 -> P50 rank 4 in (0.2, 0.4]: 0.2 + 0.2 * 1/4
    assert lat["p50"] == pytest.approx(0.25)
    assert lat["p99"] == 0.4  # rank 7.92 is in +Inf
    assert out["metrics"]["not_there"]["status"] == "missing"
    assert out["missing"] == ["not_there"]


def test_counter_reset_between_snapshots_counts_from_zero() -> None:
    first = Server()
    first.requests.labels("200").inc(10)
    first.latency.observe(0.3)
    first.latency.observe(0.3)
    before = _snap(first.registry, 0)
    restarted = Server()  # the server restarted during the level
    restarted.requests.labels("200").inc(3)
    restarted.latency.observe(0.15)
    after = _snap(restarted.registry, 1_000_000_000)
    out = delta(before, after)
    series = out["metrics"]["app_requests_total"]["series"][0]
    assert series["reset"] is True and series["delta"] == 3.0
    lat = out["metrics"]["app_latency_seconds"]["series"][0]
    assert lat["reset"] is True and lat["count"] == 1.0


def test_failed_snapshot_makes_the_delta_unavailable_not_zero() -> None:
    server = Server()
    before = _snap(server.registry, 0)
    after = Snapshot("test", "prometheus_text", 1, "t").failed(ErrorKind.CONNECT, "refused")
    out = delta(before, after, expected=("app_requests_total",))
    assert out["status"] == "unavailable"
    assert "connect" in out["reason"] and "refused" in out["reason"]
    assert "metrics" not in out


def test_metric_present_in_one_snapshot_only_says_so() -> None:
    server = Server()
    before = _snap(server.registry, 0)
    Gauge("late_gauge", "registered mid-level", registry=server.registry).set(7)
    after = _snap(server.registry, 1)
    late = delta(before, after)["metrics"]["late_gauge"]
    assert late["status"] == "missing_before"
    assert late["series"][0]["after"] == 7.0 and late["series"][0]["before"] is None
    gone = delta(after, before)["metrics"]["late_gauge"]
    assert gone["status"] == "missing_after"


def test_triton_counters_keep_their_exposed_names() -> None:
    # Triton writes counters without the _total suffix; the parser would otherwise rename them.
    text = (
        "# HELP nv_inference_count Number of inferences performed\n"
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{model="m",version="1"} 12\n'
        "# HELP vllm:num_preemptions_total Preemptions\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        'vllm:num_preemptions_total{model_name="m"} 2\n'
    )
    snap = parse_prometheus_text(text, Snapshot("t", "prometheus_text", 0, "t"))
    assert set(snap.families) == {"nv_inference_count", "vllm:num_preemptions_total"}
    assert snap.families["nv_inference_count"].values == {(("model", "m"), ("version", "1")): 12.0}


def _triton_body(success: int, queue_ns: int, infer_ns: int) -> dict[str, object]:
    stage = {"count": success}
    return {
        "model_stats": [
            {
                "name": "m",
                "version": "1",
                "inference_count": success,
                "execution_count": success,
                "inference_stats": {
                    "success": {**stage, "ns": queue_ns + infer_ns},
                    "fail": {"count": 0, "ns": 0},
                    "queue": {**stage, "ns": queue_ns},
                    "compute_infer": {**stage, "ns": infer_ns},
                },
            }
        ]
    }


def test_triton_stats_stage_means_over_a_level() -> None:
    before = parse_triton_stats(
        _triton_body(10, 5_000_000, 20_000_000), Snapshot("t", "triton_stats", 0, "t")
    )
    after = parse_triton_stats(
        _triton_body(30, 45_000_000, 60_000_000), Snapshot("t", "triton_stats", 1, "t")
    )
    stages = stage_means(delta(before, after)["metrics"])["m/1"]
    assert stages["queue"] == {"count": 20.0, "total_ms": 40.0, "mean_us": 2000.0}
    assert stages["compute_infer"]["mean_us"] == 2000.0
    assert stages["fail"]["count"] == 0.0 and stages["fail"]["mean_us"] is None
    with pytest.raises(ValueError, match="model_stats"):
        parse_triton_stats({"models": []}, Snapshot("t", "triton_stats", 0, "t"))
    with pytest.raises(ValueError, match="Triton's shape"):
        parse_triton_stats({"model_stats": [{"version": "1"}]}, Snapshot("t", "triton_stats", 0, "t"))
