"""The drift check's verdict ladder, directly (issue 33 item 7): NaN and infinities compare
nothing and are never a Pass or a Warn; a drift at the threshold fails, as the docs say, also
when float rounding leaves it a hair below; the warn band is at-or-above too; the messages say
"<" for a pass and ">=" for a fail and never print a passing drift as the threshold."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mcp_checks.drift import (
    assess_rule,
    compare,
    judge,
    reaches,
    series_verdict,
    worst_per_series,
)
from mcp_checks.drift.compare import REL_TOL, SeriesDrift, number, pct, pct_against
from mcp_checks.drift.prom import RuleDefinition, drifts_at
from mcp_checks.verdict import Verdict

A, B = (("job", "a"),), (("job", "b"),)
NAN, INF = math.nan, math.inf
T, W = 0.003, 0.001  # threshold and warn threshold


def one(recorded: float, raw: float, threshold: float = T, warn: float | None = W) -> Any:
    return assess_rule("r", compare({A: recorded}, {A: raw}, 0), threshold, warn, "prom")


# -- the ladder, one series ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("drift", "warn", "verdict"),
    [
        (0.0, W, Verdict.PASS),
        (0.0, None, Verdict.PASS),
        (W * 0.999, W, Verdict.PASS),  # just below the warn band
        (W, W, Verdict.WARN),  # the warn band's lower edge is in it
        (W * 1.001, W, Verdict.WARN),
        (T * 0.999, W, Verdict.WARN),  # just below the threshold
        (T * 0.999, None, Verdict.PASS),  # no warn band: below the threshold passes
        (T, W, Verdict.FAIL),  # at the threshold fails
        (T, None, Verdict.FAIL),
        (T * 1.001, W, Verdict.FAIL),
        (INF, W, Verdict.FAIL),  # a difference from a zero reference, or a one-sided series
        (NAN, W, Verdict.INCONCLUSIVE),  # nothing compared: neither Pass nor Warn
        (NAN, None, Verdict.INCONCLUSIVE),
    ],
)
def test_series_verdict_edges(drift: float, warn: float | None, verdict: Verdict) -> None:
    assert series_verdict(drift, T, warn) == verdict


def test_at_a_limit_is_as_a_person_reads_it_not_as_float_rounding_leaves_it() -> None:
    drift = abs(100.1 - 100.0) / 100.0  # 0.1 % written, 0.000999999999999 in binary
    assert drift < 0.001  # what let "0.1000% < 0.1000%" pass
    assert reaches(drift, 0.001)
    assert reaches(0.001 * (1 - REL_TOL / 2), 0.001)
    assert not reaches(0.001 * (1 - REL_TOL * 2), 0.001)  # beyond rounding: really below
    assert not reaches(0.000999, 0.001)
    assert reaches(0.0010001, 0.001) and reaches(INF, 0.001)
    assert not reaches(NAN, 0.001) and not reaches(0.0, 0.001)


def test_a_drift_exactly_at_the_threshold_fails_with_a_consistent_message() -> None:
    """Issue 33 item 7: 100.1 against 100 at a 0.1 % threshold read
    "max drift 0.1000% < 0.1000%" and passed, though at-or-above fails."""
    out = one(100.1, 100.0, threshold=0.001, warn=None)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out.message
    assert "drift 0.1000% >= 0.1000%" in out.message
    [finding] = out.findings
    assert (finding.reason, finding.observed) == (
        "DriftAboveThreshold",
        "recorded=100.1, raw=100, drift=0.1000%",
    )
    exact = one(1.25, 1.0, threshold=0.25, warn=None)  # exact in binary
    assert exact.outcome == Verdict.FAIL and "drift 25.0000% >= 25.0000%" in exact.message


def test_the_warn_band_starts_at_the_warn_threshold() -> None:
    at_warn = one(100.1, 100.0, threshold=0.003, warn=0.001)  # 0.1 % as written, at the warn edge
    assert (at_warn.outcome, at_warn.reason) == (Verdict.WARN, "MetricDriftInWarnBand"), at_warn.message
    assert "drift 0.1000%" in at_warn.message and ">= 0.1000% and < 0.3000%" in at_warn.message
    assert [f.reason for f in at_warn.findings] == ["DriftInWarnBand"]
    below = one(100.09, 100.0, threshold=0.003, warn=0.001)
    assert (below.outcome, below.reason) == (Verdict.PASS, "MetricDriftWithinThreshold")
    assert below.findings == []


def test_a_passing_drift_never_prints_as_the_threshold() -> None:
    out = one(100.0999999, 100.0, threshold=0.001, warn=None)  # 0.0999999 %: really below
    assert out.outcome == Verdict.PASS, out.message
    shown = out.message.split("max drift ", 1)[1]
    drift, limit = shown.split(" < ")
    assert drift != limit and drift.startswith("0.0999999") and limit.startswith("0.1000000"), out.message
    assert pct_against(0.0009999999, 0.001) == ("0.09999999%", "0.10000000%")
    assert pct_against(0.0005, 0.001) == ("0.0500%", "0.1000%")
    assert pct_against(0.001, 0.001) == ("0.1000%", "0.1000%")  # at it: ">=" reads true
    assert pct_against(INF, 0.001) == ("inf", "0.1000%")


def test_values_and_drifts_print_as_prometheus_writes_them() -> None:
    assert [number(x) for x in (NAN, INF, -INF, 2.5, None)] == ["NaN", "+Inf", "-Inf", "2.5", "absent"]
    assert [pct(x) for x in (NAN, INF, 0.003)] == ["NaN", "inf", "0.3000%"]


# -- NaN and infinities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "raw", "reason"),
    [
        (NAN, NAN, "NotANumber"),  # issue 33 item 7: was Pass 0 %
        (NAN, 5.0, "NotANumber"),
        (5.0, NAN, "NotANumber"),
        (NAN, INF, "NotANumber"),
        (INF, INF, "NotFinite"),  # was Pass 0 %
        (-INF, -INF, "NotFinite"),
        (INF, 5.0, "NotFinite"),
        (5.0, -INF, "NotFinite"),
    ],
)
def test_a_series_without_a_finite_number_on_both_sides_is_inconclusive(
    recorded: float, raw: float, reason: str
) -> None:
    for warn in (None, W):
        out = one(recorded, raw, warn=warn)
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, reason), out.message
        assert "no number compared on 1 series" in out.message and 'r{job="a"}' in out.message
        [finding] = out.findings
        assert (finding.outcome, finding.reason) == (Verdict.INCONCLUSIVE, reason)
        assert "r.maxDrift" not in out.observed  # no figure where nothing was compared
    assert f"recorded={number(recorded)}, raw={number(raw)}" in one(recorded, raw).message


def test_a_nan_series_beside_passing_ones_keeps_the_rule_from_passing() -> None:
    out = assess_rule("r", compare({A: 1.0, B: NAN}, {A: 1.0, B: NAN}, 0), T, W, "prom")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NotANumber"), out.message
    assert out.observed == {"r.series": "2", "r.maxDrift": "0.0000%"}
    assert [f.subject for f in out.findings] == ['r{job="b"}']


def test_a_failing_series_outranks_a_nan_one() -> None:
    out = assess_rule("r", compare({A: 2.0, B: NAN}, {A: 1.0, B: NAN}, 0), T, W, "prom")
    assert (out.outcome, out.reason) == (Verdict.FAIL, "MetricDriftAboveThreshold"), out.message
    assert [f.reason for f in out.findings] == ["DriftAboveThreshold", "NotANumber"]


def test_a_nan_instant_over_the_window_is_not_averaged_away() -> None:
    """Each instant is judged; a series keeps its worst on the ladder, so one instant that
    compared nothing keeps a passing series from passing, and a failing instant still fails."""
    passing = compare({A: 1.0}, {A: 1.0}, 1)
    nothing = compare({A: NAN}, {A: NAN}, 2)
    failing = compare({A: 2.0}, {A: 1.0}, 3)
    [worst] = worst_per_series(judge(d, T, W) for d in passing + nothing + passing)
    assert (worst.verdict, worst.series.at) == (Verdict.INCONCLUSIVE, 2)
    assert assess_rule("r", nothing + passing, T, W, "p").outcome == Verdict.INCONCLUSIVE
    [worst] = worst_per_series(judge(d, T, W) for d in nothing + failing + passing)
    assert (worst.verdict, worst.series.at) == (Verdict.FAIL, 3)
    warned = compare({A: 1.002}, {A: 1.0}, 4)  # a warn instant ranks below a NaN one
    [worst] = worst_per_series(judge(d, T, W) for d in warned + nothing)
    assert worst.verdict == Verdict.INCONCLUSIVE


def test_the_larger_drift_decides_between_instants_of_one_verdict() -> None:
    small, large = compare({A: 1.005}, {A: 1.0}, 1), compare({A: 1.5}, {A: 1.0}, 2)
    for order in (small + large, large + small):
        [worst] = worst_per_series(judge(d, T, W) for d in order)
        assert worst.series.at == 2
    ranked = worst_per_series(
        judge(d, T, W) for d in compare({A: 1.0, B: 1.5}, {A: 1.0, B: 1.0}, 0)
    )  # worst first
    assert [j.series.labels for j in ranked] == [B, A]


# -- zero references and one-sided series ---------------------------------------------------------


def test_a_zero_reference_compares() -> None:
    same = one(0.0, 0.0)
    assert (same.outcome, same.observed["r.maxDrift"]) == (Verdict.PASS, "0.0000%")
    differs = one(1e-9, 0.0)
    assert (differs.outcome, differs.observed["r.maxDrift"]) == (Verdict.FAIL, "inf"), differs.message
    assert "drift inf >= 0.3000%" in differs.message and "raw 0" in differs.message


def test_judge_names_one_sided_series() -> None:
    judged = [judge(d, T, W) for d in compare({A: 1.0}, {B: 2.0}, 0)]
    assert {j.series.labels: (j.verdict, j.reason) for j in judged} == {
        A: (Verdict.FAIL, "SeriesMissingFromRaw"),
        B: (Verdict.FAIL, "SeriesMissingFromRecorded"),
    }
    assert judge(SeriesDrift(A, None, NAN, 0), T, W).verdict == Verdict.FAIL  # absent beats NaN


def test_negative_values_drift_by_the_magnitude_of_the_reference() -> None:
    out = one(-100.5, -100.0)
    assert (out.outcome, out.observed["r.maxDrift"]) == (Verdict.FAIL, "0.5000%")
    assert one(-100.0, -100.0).outcome == Verdict.PASS


# -- through the reader: NaN samples as Prometheus sends them ------------------------------------


class FakeProm:
    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.answers = answers

    def custom_query(self, query: str, params: dict[str, str]) -> list[dict[str, Any]]:
        return self.answers[query]


def _sample(value: str, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [1700000000.0, value]}


@pytest.mark.parametrize(("recorded", "raw"), [("NaN", "NaN"), ("+Inf", "+Inf"), ("NaN", "0")])
def test_nan_samples_from_prometheus_are_inconclusive(recorded: str, raw: str) -> None:
    """0 / 0 in a rule and in its reference both give NaN: the ratio of an idle route."""
    prom = FakeProm(
        {
            "rec": [_sample(recorded, __name__="rec", route="/idle")],
            "timestamp(rec)": [_sample("1700000000", route="/idle")],
            "sum(a) / sum(b)": [_sample(raw, route="/idle")],
        }
    )
    drifts = drifts_at(prom, "rec", [RuleDefinition("sum(a) / sum(b)", ())], 1700000000.0)
    out = assess_rule("rec", drifts, T, W, "prom")
    assert out.outcome == Verdict.INCONCLUSIVE and out.reason in ("NotANumber", "NotFinite"), out.message
