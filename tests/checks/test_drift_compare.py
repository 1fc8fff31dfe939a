"""Drift math and one rule's verdict, without Prometheus."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mcp_checks.drift import (
    MalformedAnswer,
    MetricDriftSpec,
    RecordingRule,
    assess_rule,
    compare,
    judge,
    label_key,
    loaded_rules,
    parse_vector,
    relative_drift,
    worst_per_series,
)
from mcp_checks.drift.prom import drifts_at
from mcp_checks.verdict import Verdict


def sample(value: str, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [1700000000.0, value]}


def test_relative_drift_including_zero_negative_and_non_finite() -> None:
    assert relative_drift(100.3, 100.0) == pytest.approx(0.003)
    assert relative_drift(99.7, 100.0) == pytest.approx(0.003)
    assert relative_drift(-5.0, -5.0) == 0.0
    assert relative_drift(-100.5, -100.0) == pytest.approx(0.005)  # |raw|, not raw
    assert relative_drift(-100.0, 100.0) == pytest.approx(2.0)
    assert relative_drift(0.0, 0.0) == 0.0
    assert relative_drift(1e-9, 0.0) == math.inf
    assert relative_drift(-1e-9, 0.0) == math.inf
    assert relative_drift(0.0, 2.0) == 1.0
    assert relative_drift(4.0, 2.0) == 1.0
    assert relative_drift(3.0, 4.0) == 0.25  # divided by raw, not by recorded
    # issue 33 item 7: NaN with NaN drifted 0 and passed; no number was compared at all
    for recorded, raw in [
        (math.nan, math.nan),
        (math.nan, 1.0),
        (1.0, math.nan),
        (math.inf, math.inf),
        (-math.inf, -math.inf),
        (1.0, math.inf),
        (math.inf, 1.0),
        (math.nan, math.inf),
        (0.0, -math.inf),
    ]:
        assert math.isnan(relative_drift(recorded, raw)), (recorded, raw)


def test_join_leaves_name_out_and_applies_rule_labels() -> None:
    recorded = parse_vector([sample("10", __name__="job:rate", job="a", team="x")], "rec")
    raw = parse_vector([sample("10", job="a")], "raw", extra=[("team", "x")])
    assert recorded == raw == {(("job", "a"), ("team", "x")): 10.0}
    assert label_key({"__name__": "m", "b": "2", "a": "1"}) == (("a", "1"), ("b", "2"))


def test_malformed_vectors_are_refused() -> None:
    with pytest.raises(MalformedAnswer):
        parse_vector([1700000000, "3"], "scalar")  # a scalar result, not a vector
    with pytest.raises(MalformedAnswer):
        parse_vector([{"metric": {}, "value": [0, "not-a-number"]}], "x")
    with pytest.raises(MalformedAnswer, match="share the label set"):
        parse_vector([sample("1", __name__="a", job="x"), sample("2", __name__="b", job="x")], "x")
    assert (
        parse_vector(
            [
                sample("NaN"),
            ],
            "x",
        )
        != {}
    )


def test_one_sided_series_are_infinite_drift_findings() -> None:
    rec = {(("job", "a"),): 1.0, (("job", "b"),): 2.0}
    raw = {(("job", "a"),): 1.0, (("job", "c"),): 3.0}
    drifts = compare(rec, raw, 100.0)
    assert [(d.recorded, d.raw) for d in drifts] == [(1.0, 1.0), (2.0, None), (None, 3.0)]
    out = assess_rule("r", drifts, 0.003, None, "prom")
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold")
    reasons = {f.subject: f.reason for f in out.findings}
    assert reasons == {'r{job="b"}': "SeriesMissingFromRaw", 'r{job="c"}': "SeriesMissingFromRecorded"}
    assert "one side only" in out.message


def test_fail_message_carries_the_largest_drift_and_its_series() -> None:
    rec = {(("job", "a"),): 100.1, (("job", "b"),): 105.0, (("job", "c"),): 0.0}
    raw = {(("job", "a"),): 100.0, (("job", "b"),): 100.0, (("job", "c"),): 0.0}
    out = assess_rule("r", compare(rec, raw, 0.0), 0.003, 0.0005, "prom")
    assert out.outcome == Verdict.FAIL
    assert "5.0000%" in out.message and 'r{job="b"}' in out.message
    assert out.observed["r.maxDrift"] == "5.0000%"
    by_subject = {f.subject: f for f in out.findings}
    assert by_subject['r{job="b"}'].outcome == Verdict.FAIL
    assert by_subject['r{job="a"}'].outcome == Verdict.WARN  # 0.1% is in [0.05%, 0.3%)
    assert by_subject['r{job="b"}'].observed == "recorded=105, raw=100, drift=5.0000%"
    assert 'r{job="c"}' not in by_subject


def test_threshold_edges_warn_band_and_pass() -> None:
    key = (("job", "a"),)
    at_threshold = assess_rule("r", compare({key: 1.25}, {key: 1.0}, 0), 0.25, None, "p")  # exact in binary
    assert at_threshold.outcome == Verdict.FAIL  # >= fails
    warn = assess_rule("r", compare({key: 100.2}, {key: 100.0}, 0), 0.003, 0.001, "p")
    assert (warn.outcome, warn.reason) == (Verdict.WARN, "MetricDriftInWarnBand")
    ok = assess_rule("r", compare({key: 100.0}, {key: 100.0}, 0), 0.003, 0.001, "p")
    assert (ok.outcome, ok.reason) == (Verdict.PASS, "MetricDriftWithinThreshold")
    assert ok.findings == []


def test_no_recorded_series_is_inconclusive_even_with_raw_series() -> None:
    out = assess_rule("r", compare({}, {(("job", "a"),): 1.0}, 0), 0.003, None, "p")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoRecordedSeries")
    assert assess_rule("r", [], 0.003, None, "p").outcome == Verdict.INCONCLUSIVE


def test_worst_instant_per_series_counts() -> None:
    key = (("job", "a"),)
    drifts = compare({key: 100.0}, {key: 100.0}, 1) + compare({key: 101.0}, {key: 100.0}, 2)
    [worst] = worst_per_series(judge(d, 0.003, None) for d in drifts)
    assert worst.series.at == 2 and worst.series.drift == pytest.approx(0.01)
    assert worst.verdict == Verdict.FAIL


RULES = {
    "status": "success",
    "data": {
        "groups": [
            {
                "name": "g",
                "rules": [
                    {"type": "alerting", "name": "job:rate", "query": "x"},
                    {
                        "type": "recording",
                        "name": "job:rate",
                        "query": "sum(rate(x[1m]))",
                        "labels": {"team": "a"},
                        "health": "ok",
                    },
                    {
                        "type": "recording",
                        "name": "broken",
                        "query": "y",
                        "health": "err",
                        "lastError": "bad",
                    },
                ],
            }
        ]
    },
}


def test_loaded_rules_from_the_rules_api() -> None:
    job, broken = loaded_rules(RULES)  # the alerting rule of the same name is left out
    assert (job.record, job.query, job.labels, job.health) == (
        "job:rate",
        "sum(rate(x[1m]))",
        (("team", "a"),),
        "ok",
    )
    assert (broken.health, broken.last_error) == ("err", "bad")
    assert job.last_evaluation is None and job.interval_s is None  # not in this answer: unknown
    with pytest.raises(MalformedAnswer):
        loaded_rules({"data": {}})


class FakeProm:
    """Answers by query text, and records the time each query was asked for."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, str]] = []

    def custom_query(self, query: str, params: dict[str, str]) -> list[dict[str, Any]]:
        self.asked.append((query, params["time"]))
        return self.answers[query]


def test_raw_expression_is_evaluated_at_the_recorded_samples_own_timestamp() -> None:
    from mcp_checks.drift.prom import RuleDefinition

    prom = FakeProm(
        {
            "rec": [sample("10", __name__="rec", job="a")],
            "timestamp(rec)": [sample("1699999995.5", job="a")],
            "sum by (job) (x)": [sample("10", job="a")],
        }
    )
    drifts = drifts_at(prom, "rec", [RuleDefinition("sum by (job) (x)", ())], 1700000000.0)  # type: ignore[arg-type]
    assert [d.drift for d in drifts] == [0.0]
    assert ("sum by (job) (x)", "1699999995.500") in prom.asked


def test_spec_validation() -> None:
    rule = (RecordingRule("r"),)
    with pytest.raises(ValueError):
        MetricDriftSpec("http://p", ())
    with pytest.raises(ValueError):
        MetricDriftSpec("http://p", rule, threshold=0.003, warn_threshold=0.004)
    with pytest.raises(ValueError):
        MetricDriftSpec("http://p", rule, points=3)
    spec = MetricDriftSpec("http://p", rule, at=100.0, window_s=10, points=3)
    assert spec.instants(0) == [90.0, 95.0, 100.0]
    assert MetricDriftSpec("http://p", rule).threshold == 0.003
