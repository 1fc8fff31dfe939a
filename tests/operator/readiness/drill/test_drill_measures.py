"""The drill's new measurements, their pure parts: retry amplification from counters, the
autoscaler's lag from samples, the longest write outage, and the Chaos Mesh safety rules."""

from __future__ import annotations

import pytest

from mcp_bench.engines import run_plan
from mcp_bench.plan import RunPlan
from mcp_checks.verdict import Verdict
from mcp_operator.api.drill import KpiThresholds, StageLoad
from mcp_operator.api.drillmeasures import ServerRequests
from mcp_operator.readiness.drill.autoscaling import LoadRise, ScaleSample, hpa_kpis, lags, load_rises
from mcp_operator.readiness.drill.load import figures
from mcp_operator.readiness.drill.retries import Reading, amplification_kpi, counter_total, stage_requests
from mcp_operator.readiness.drill.stageplan import stage_plan
from mcp_operator.readiness.drill.writeprobe import FaultWrites, Write, longest_outage, write_outage_kpi
from mcp_operator.readiness.faults.base import FaultRefused
from mcp_operator.readiness.faults.chaos import pinned_spec, taken
from mcp_refserver import RunningServer

T = KpiThresholds(retry_amplification=1.5, retry_amplification_warn=1.2)
TEXT = """# TYPE http_requests counter
http_requests_total{path="/delay",code="200"} 90
http_requests_created{path="/delay",code="200"} 1.7e9
http_requests_total{path="/delay",code="503"} 30
http_requests_total{path="/health",code="200"} 500
"""


def test_the_counter_is_summed_over_matching_series_and_a_wrong_name_is_no_count() -> None:
    assert (
        counter_total(TEXT, ServerRequests(urls=["http://t/metrics"], counters=["http_requests_total"]))
        == 620
    )
    by_path = ServerRequests(
        urls=["http://t/metrics"], counters=["http_requests"], match_labels={"path": "/delay"}
    )
    assert counter_total(TEXT, by_path) == 120  # the _created sample is not a count
    assert counter_total(TEXT, ServerRequests(urls=["http://t/metrics"], counters=["requests_total"])) is None
    fresh = ServerRequests(
        urls=["http://t/metrics"], counters=["http_requests"], match_labels={"path": "/other"}
    )
    assert counter_total(TEXT, fresh) == 0  # the counter exists, the series has not been incremented yet


def _row(server: float, sent: int, completed: int | None = None) -> object:
    return stage_requests(
        "spike", Reading(100.0), Reading(100.0 + server), sent, sent if completed is None else completed, []
    )


@pytest.mark.parametrize(
    ("server", "sent", "verdict", "reason"),
    [
        (100, 100, Verdict.PASS, "NoRetryStorm"),
        (130, 100, Verdict.WARN, "RetryAmplified"),
        (240, 100, Verdict.FAIL, "RetryStorm"),
    ],
)
def test_amplification_against_the_limit_and_the_warn_band(
    server: float, sent: int, verdict: Verdict, reason: str
) -> None:
    row = amplification_kpi([_row(server, sent, completed=min(server, sent))], T)  # type: ignore[list-item]
    assert row is not None and (row.verdict, row.reason) == (verdict, reason)
    assert row.measured.startswith(f"{server / sent:.2f}x")


def test_no_count_a_reset_counter_or_a_partial_count_is_never_a_pass() -> None:
    unread = stage_requests("a", Reading(None, "connection refused"), Reading(5.0), 10, 10, [])
    reset = stage_requests("a", Reading(50.0), Reading(3.0), 10, 10, [])
    partial = stage_requests("a", Reading(0.0), Reading(40.0), 100, 100, [])  # one replica of two seen
    for rows, reason in (
        ([unread], "ServerRequestsUnavailable"),
        ([reset], "ServerRequestsUnavailable"),
        ([partial], "PartialServerRequests"),
    ):
        row = amplification_kpi(rows, T)
        assert row is not None and (row.verdict, row.reason) == (Verdict.INCONCLUSIVE, reason), row
    assert amplification_kpi([], T) is None  # not asked for: no row


def _samples(points: list[tuple[float, int | None, int]], blind: str = "") -> list[ScaleSample]:
    return [ScaleSample(at, "ref", desired, ready, blind) for at, desired, ready in points]


def test_autoscaler_lag_from_the_rise_to_desired_and_to_ready() -> None:
    samples = _samples([(0, 1, 1), (10, 1, 1), (12.5, 4, 1), (14, 4, 2), (17.5, 4, 4), (18, 4, 4)])
    (lag,) = lags(samples, [LoadRise("spike", 10.2)])
    assert (lag.before, lag.raised_to) == (1, 4)
    assert lag.scale_up_s == pytest.approx(2.3) and lag.ready_s == pytest.approx(7.3)
    rows = hpa_kpis(samples, [LoadRise("spike", 10.2)], "ref", KpiThresholds())
    assert [(r.name, r.verdict, r.measured) for r in rows] == [
        ("hpaScaleUpSeconds", Verdict.PASS, "2.30 s"),
        ("hpaReadySeconds", Verdict.PASS, "7.30 s"),
    ]
    assert "1 to 4 replicas in stage spike" in rows[0].evidence


def test_autoscaler_rows_say_what_is_missing() -> None:
    t = KpiThresholds()
    rise = [LoadRise("spike", 1.0)]
    none = hpa_kpis([ScaleSample(0, None, None, 1)], rise, "ref", t)
    blind = hpa_kpis(
        _samples([(0, 1, 1), (5, 1, 1)], "FailedGetExternalMetric: no metrics API"), rise, "ref", t
    )
    idle = hpa_kpis(_samples([(0, 1, 1), (5, 1, 1)]), rise, "ref", t)
    flat = hpa_kpis(_samples([(0, 1, 1)]), [], "ref", t)
    never_ready = hpa_kpis(_samples([(0, 1, 1), (2, 3, 1), (5, 3, 2)]), rise, "ref", t)
    assert [r.reason for r in none] == ["NoHorizontalPodAutoscaler"]
    assert [r.reason for r in blind] == ["AutoscalerBlind"] and "no metrics API" in blind[0].measured
    assert [r.reason for r in idle] == ["NoScaleUp"]
    assert [r.reason for r in flat] == ["LoadNeverRose"]
    assert all(r[0].verdict == Verdict.INCONCLUSIVE for r in (none, blind, idle, flat))
    assert [(r.name, r.verdict) for r in never_ready] == [
        ("hpaScaleUpSeconds", Verdict.PASS),
        ("hpaReadySeconds", Verdict.FAIL),
    ]


def test_load_rises_only_where_a_stage_loads_more_than_the_one_before() -> None:
    rises = load_rises(
        [("baseline", 0.0, 5.0), ("mixed", 10.0, 32.0), ("calm", 20.0, 8.0), ("spike", 30.0, 90.0)]
    )
    assert [(r.stage, r.at) for r in rises] == [("mixed", 10.0), ("spike", 30.0)]


def test_the_longest_write_outage_runs_from_the_first_failure_to_the_next_success() -> None:
    ok = [Write(t, t + 0.01, True) for t in (0.0, 0.1, 0.2)]
    outage = [Write(0.3, 0.31, False), Write(0.33, 0.34, False), Write(0.36, 1.1, True)]
    slow = [Write(2.0, 3.5, True)]
    assert longest_outage(ok) == pytest.approx(0.01)  # every write succeeded at once: its own time
    assert longest_outage(ok + outage + ok) == pytest.approx(0.8)
    assert longest_outage(ok + slow) == pytest.approx(1.5)  # a write that took 1.5 s was unavailable
    assert longest_outage(ok + outage[:2]) is None  # never came back within the record
    t = KpiThresholds(write_outage_seconds=0.5)
    row = write_outage_kpi([FaultWrites("etcdLeaderMove f in s", tuple(ok + outage + ok))], t)
    assert row is not None and (row.verdict, row.measured) == (Verdict.FAIL, "0.80 s")
    assert "2 of 9 writes failed" in row.evidence
    never = write_outage_kpi([FaultWrites("f", tuple(ok + outage[:2]))], t)
    assert never is not None and never.reason == "NeverWritable"
    empty = write_outage_kpi([FaultWrites("f", ())], t)
    assert empty is not None and empty.verdict == Verdict.INCONCLUSIVE


def test_chaos_selectors_are_pinned_to_the_namespace_and_others_refused() -> None:
    spec = {
        "action": "delay",
        "mode": "all",
        "selector": {"labelSelectors": {"app": "ref"}},
        "target": {"selector": {}},
    }
    pinned = pinned_spec(spec, "ml")
    assert pinned["selector"]["namespaces"] == ["ml"] and pinned["target"]["selector"]["namespaces"] == ["ml"]
    assert "namespaces" not in spec["selector"]  # the user's spec is left as it was
    for bad in ({"selector": {"namespaces": ["ml", "prod"]}}, {"selector": {"pods": {"prod": ["db-0"]}}}):
        with pytest.raises(FaultRefused) as refused:
            pinned_spec(bad, "ml")
        assert refused.value.reason == "OutsideNamespace"
    assert pinned_spec({}, "ml")["selector"] == {"namespaces": ["ml"]}


def test_chaos_modes_count_at_most_what_they_take() -> None:
    assert [
        taken(m, v, 10) for m, v in [("one", ""), ("all", ""), ("fixed", "3"), ("fixed-percent", "25")]
    ] == [
        1,
        10,
        3,
        3,
    ]
    assert taken("random-max-percent", "100", 4) == 4 and taken("fixed", "9", 2) == 2


def test_the_load_plan_carries_the_clients_retry_policy() -> None:
    load = StageLoad.model_validate(
        {
            "rate": 10,
            "durationSeconds": 4,
            "path": "/delay",
            "retry": {"attempts": 5, "backoffMs": 100, "jitter": True},
        }
    )
    plan = stage_plan(load, "http://127.0.0.1:1").model_dump(exclude_unset=True)
    assert plan["retry"] == {"attempts": 5, "backoff_ms": 100.0, "max_backoff_ms": 10000.0, "jitter": True}
    assert stage_plan(StageLoad(rate=10, duration_seconds=4), "http://127.0.0.1:1").retry is None


def test_several_counters_are_summed_as_triton_counts_successes_and_failures_apart() -> None:
    triton = """# TYPE nv_inference_request_success counter
nv_inference_request_success{model="m",version="1"} 90
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="m",version="1"} 12
"""
    both = ServerRequests(
        urls=["http://t/metrics"], counters=["nv_inference_request_success", "nv_inference_request_failure"]
    )
    assert counter_total(triton, both) == 102


async def test_stage_figures_keep_drops_apart_from_failures(refserver: RunningServer) -> None:
    """A real open-loop run whose in-flight cap (1) drops most arrivals against a 50 ms server:
    the stage's failures are the requests sent that failed (none), the drops are counted apart."""
    load = StageLoad(rate=100, duration_seconds=1.0, window_seconds=0.5, path="/delay?ms=50")
    plan = stage_plan(load, refserver.url).model_dump(exclude_unset=True)
    plan["levels"]["max_concurrency"] = 1
    doc = await run_plan(RunPlan.model_validate(plan))
    stage = figures(doc, load)
    assert stage.errors == 0 and stage.completed > 0
    assert stage.dropped == sum(level.dropped for level in doc.levels) > 0
    assert sum(w.dropped for w in stage.windows) == stage.dropped
    assert all(w.errors == 0 for w in stage.windows)
