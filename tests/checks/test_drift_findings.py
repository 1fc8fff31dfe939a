"""What one rule's drift verdict reports beside its outcome: each finding's figures, limit and
source, the observed maximum over the series that were compared, and messages that name what
was seen (found by mutation testing: these were unchecked)."""

from __future__ import annotations

import math
from typing import Any

from mcp_checks.drift import assess_rule, compare, judge, worst_per_series
from mcp_checks.drift.compare import pct_against
from mcp_checks.verdict import Verdict

A, B = (("job", "a"),), (("job", "b"),)
T = 0.003


def _rule(recorded: dict[Any, float], raw: dict[Any, float], warn: float | None = None) -> Any:
    return assess_rule("r", compare(recorded, raw, 0), T, warn, "http://prom:9090")


def test_a_finding_carries_its_figures_its_limit_and_its_source() -> None:
    out = _rule({A: 1.01, B: 1.0}, {A: 1.0, B: 1.0})
    [finding] = out.findings
    assert (finding.subject, finding.observed, finding.threshold, finding.source) == (
        'r{job="a"}',
        "recorded=1.01, raw=1, drift=1.0000%",
        "< 0.3000%",
        "http://prom:9090",
    )
    assert out.message == 'r: drift 1.0000% >= 0.3000% on r{job="a"} (recorded 1.01, raw 1)'


def test_a_one_sided_series_is_named_and_left_out_of_the_maximum() -> None:
    out = _rule({A: 1.01, B: 5.0}, {A: 1.0})
    assert out.observed == {"r.series": "2", "r.maxDrift": "1.0000%"}  # B compared nothing
    assert out.message == 'r: series on one side only: r{job="b"}'
    one_sided = next(f for f in out.findings if f.subject == 'r{job="b"}')
    assert (one_sided.reason, one_sided.observed) == ("SeriesMissingFromRaw", "recorded=5, raw=absent")


def test_nothing_compared_says_a_drift_needs_numbers() -> None:
    out = _rule({A: math.nan}, {A: 1.0})
    assert out.message == (
        'r: no number compared on 1 series, e.g. r{job="a"} (recorded=NaN, raw=1): '
        "a relative drift needs a finite value on both sides"
    )


def test_no_recorded_series_says_so_and_counts_what_was_there() -> None:
    out = _rule({}, {A: 1.0, B: 2.0})
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoRecordedSeries")
    assert out.message == "r: no recorded series at the evaluation time"
    assert out.observed == {"r.series": "2"}


def test_a_warn_band_from_zero_is_printed_as_zero() -> None:
    out = _rule({A: 1.001}, {A: 1.0}, warn=0.0)
    assert out.outcome == Verdict.WARN
    assert out.message == 'r: drift 0.1000% on r{job="a"} is in the warn band: >= 0.0000% and < 0.3000%'


def test_a_tie_between_instants_reports_the_first() -> None:
    """Two instants of one series with the same verdict and drift: the earlier one is reported,
    whatever came later (a report does not change with the order of equal evidence)."""
    first, later = compare({A: 100.5}, {A: 100.0}, 1), compare({A: 201.0}, {A: 200.0}, 2)
    [kept] = worst_per_series(judge(d, T, None) for d in first + later)
    assert (kept.series.at, kept.series.recorded) == (1, 100.5)


def test_a_passing_drift_gets_the_decimals_it_needs_and_no_more() -> None:
    assert pct_against(0.000999999, 0.001) == ("0.0999999%", "0.1000000%")
