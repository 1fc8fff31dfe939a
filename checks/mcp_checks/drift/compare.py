"""Pure drift math and the drift check's one verdict ladder: the recorded and the raw vectors
joined by label set, a relative drift per series, each series judged on it, and one rule's
verdict the worst of its series'.

The ladder (``series_verdict``): a series without a finite number on both sides compared
nothing, ``Inconclusive``; a drift at or above ``threshold`` is ``Fail``, at or above
``warn_threshold`` ``Warn``, anything lower ``Pass``. A series on one side only drifts without
bound (``Fail``). "At" is the limit as a person reads it: a drift that float rounding left a
hair below the limit (|100.1 - 100| / 100 is 0.000999999999999 in binary) is at it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..config.assessment import Assessment, names
from ..verdict import SEVERITY, Finding, Verdict, worst
from .vector import Labels, show

REL_TOL = 1e-9  # a drift this close (relatively) to a limit is at it: rounding, not a difference
PLACES = 4  # decimals of a percentage in messages and observed figures
MAX_PLACES = 20


def relative_drift(recorded: float, raw: float) -> float:
    """|recorded - raw| / |raw|. NaN when either side is not a finite number (NaN, ±Inf: no
    relative drift exists); 0 for equal values, zeros included; infinite for any difference
    from a raw 0."""
    if not (math.isfinite(recorded) and math.isfinite(raw)):
        return math.nan
    if recorded == raw:
        return 0.0
    if raw == 0:
        return math.inf
    return abs(recorded - raw) / abs(raw)


def reaches(drift: float, limit: float) -> bool:
    """``drift`` at or above ``limit``; within ``REL_TOL`` of it counts as at it."""
    return drift >= limit or math.isclose(drift, limit, rel_tol=REL_TOL)


def series_verdict(drift: float, threshold: float, warn_threshold: float | None) -> Verdict:
    """The ladder, for one series' drift."""
    if math.isnan(drift):
        return Verdict.INCONCLUSIVE
    if reaches(drift, threshold):
        return Verdict.FAIL
    if warn_threshold is not None and reaches(drift, warn_threshold):
        return Verdict.WARN
    return Verdict.PASS


@dataclass(frozen=True)
class SeriesDrift:
    labels: Labels
    recorded: float | None  # None: the series exists on the raw side only
    raw: float | None  # None: on the recorded side only
    at: float

    @property
    def drift(self) -> float:
        if self.recorded is None or self.raw is None:
            return math.inf
        return relative_drift(self.recorded, self.raw)


def compare(recorded: Mapping[Labels, float], raw: Mapping[Labels, float], at: float) -> list[SeriesDrift]:
    keys = sorted(set(recorded) | set(raw))
    return [SeriesDrift(k, recorded.get(k), raw.get(k), at) for k in keys]


@dataclass(frozen=True)
class Judged:
    """One series at one instant, with its verdict and why."""

    series: SeriesDrift
    verdict: Verdict
    reason: str


SERIES_REASONS = {
    Verdict.FAIL: "DriftAboveThreshold",
    Verdict.WARN: "DriftInWarnBand",
    Verdict.PASS: "DriftWithinThreshold",
}


def judge(d: SeriesDrift, threshold: float, warn_threshold: float | None) -> Judged:
    verdict = series_verdict(d.drift, threshold, warn_threshold)
    if d.recorded is None:
        reason = "SeriesMissingFromRecorded"
    elif d.raw is None:
        reason = "SeriesMissingFromRaw"
    elif verdict == Verdict.INCONCLUSIVE:
        reason = "NotANumber" if math.isnan(d.recorded) or math.isnan(d.raw) else "NotFinite"
    else:
        reason = SERIES_REASONS[verdict]
    return Judged(d, verdict, reason)


def _rank(j: Judged) -> tuple[int, float]:
    drift = j.series.drift
    return SEVERITY[j.verdict], 0.0 if math.isnan(drift) else drift


def worst_per_series(judged: Iterable[Judged]) -> list[Judged]:
    """One entry per label set, its worst instant on the ladder (then by drift); worst first."""
    out: dict[Labels, Judged] = {}
    for j in judged:
        key = j.series.labels
        if key not in out or _rank(j) > _rank(out[key]):
            out[key] = j
    return sorted(out.values(), key=_rank, reverse=True)


def pct(value: float, places: int = PLACES) -> str:
    if math.isnan(value):
        return "NaN"
    return "inf" if math.isinf(value) else f"{value:.{places}%}"


def pct_against(value: float, limit: float) -> tuple[str, str]:
    """``value`` and ``limit`` as percentages, with as many decimals as it takes for a value
    below the limit not to print as the limit ("0.1000% < 0.1000%")."""
    places = PLACES
    while places < MAX_PLACES and not reaches(value, limit) and pct(value, places) == pct(limit, places):
        places += 1
    return pct(value, places), pct(limit, places)


def number(value: float | None) -> str:
    """A sample value as Prometheus writes it; ``absent`` for a series one side lacks."""
    if value is None:
        return "absent"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:g}"


def _values(d: SeriesDrift) -> str:
    return f"recorded={number(d.recorded)}, raw={number(d.raw)}"


def _observed(j: Judged) -> str:
    d = j.series
    if d.recorded is None or d.raw is None:
        return _values(d)
    return f"{_values(d)}, drift={pct(d.drift)}"


def _message(record: str, verdict: Verdict, judged: list[Judged], t: float, w: float | None) -> str:
    top = next(j for j in judged if j.verdict == verdict)
    d, where = top.series, show(record, top.series.labels)
    if verdict == Verdict.PASS:
        drift, limit = pct_against(max(j.series.drift for j in judged), t)
        return f"{record}: {len(judged)} series, max drift {drift} < {limit}"
    if verdict == Verdict.INCONCLUSIVE:
        count = sum(j.verdict == verdict for j in judged)
        return (
            f"{record}: no number compared on {count} series, e.g. {where} ({_values(d)}): "
            "a relative drift needs a finite value on both sides"
        )
    if d.recorded is None or d.raw is None:
        one_sided = [show(record, j.series.labels) for j in judged if j.reason.startswith("SeriesMissing")]
        return f"{record}: series on one side only: {names(one_sided)}"
    drift, limit = pct_against(d.drift, t)
    if verdict == Verdict.FAIL:
        values = f"recorded {number(d.recorded)}, raw {number(d.raw)}"
        return f"{record}: drift {drift} >= {limit} on {where} ({values})"
    return f"{record}: drift {drift} on {where} is in the warn band: >= {pct(w or 0.0)} and < {limit}"


RULE_REASONS = {
    Verdict.FAIL: "MetricDriftAboveThreshold",
    Verdict.WARN: "MetricDriftInWarnBand",
    Verdict.PASS: "MetricDriftWithinThreshold",
}


def assess_rule(
    record: str,
    drifts: list[SeriesDrift],
    threshold: float,
    warn_threshold: float | None,
    source: str,
) -> Assessment:
    """One rule: each series at its worst instant on the ladder, the rule the worst series."""
    judged = worst_per_series(judge(d, threshold, warn_threshold) for d in drifts)
    observed = {f"{record}.series": str(len(judged))}
    numbers = [j.series.drift for j in judged if j.series.recorded is not None and j.series.raw is not None]
    numbers = [x for x in numbers if not math.isnan(x)]
    if numbers:
        observed[f"{record}.maxDrift"] = pct(max(numbers))
    if not any(j.series.recorded is not None for j in judged):
        return Assessment(
            Verdict.INCONCLUSIVE,
            "NoRecordedSeries",
            f"{record}: no recorded series at the evaluation time",
            observed=observed,
        )
    verdict = worst([j.verdict for j in judged])
    top = next(j for j in judged if j.verdict == verdict)
    limit = f"< {pct(threshold)}"
    findings = [
        Finding(show(record, j.series.labels), j.verdict, j.reason, _observed(j), limit, source)
        for j in judged
        if j.verdict != Verdict.PASS
    ]
    reason = RULE_REASONS.get(verdict, top.reason)
    message = _message(record, verdict, judged, threshold, warn_threshold)
    return Assessment(verdict, reason, message, findings, observed)
