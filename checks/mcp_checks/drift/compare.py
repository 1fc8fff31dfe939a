"""Pure drift math: join the recorded and the raw vectors by label set (``__name__`` left
out), relative drift per series, and one rule's verdict from it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config.assessment import Assessment, names
from ..verdict import Finding, Verdict

Labels = tuple[tuple[str, str], ...]


class MalformedAnswer(ValueError):
    """Prometheus answered, but not with what the API documents."""


def label_key(metric: Mapping[str, str], extra: Iterable[tuple[str, str]] = ()) -> Labels:
    """The join key: every label but ``__name__``, plus the labels a rule adds (they win)."""
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    labels.update(extra)
    return tuple(sorted(labels.items()))


def show(record: str, labels: Labels) -> str:
    return record + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def parse_vector(result: Any, what: str, extra: Iterable[tuple[str, str]] = ()) -> dict[Labels, float]:
    """An instant-vector ``data.result`` as label set -> value; anything else is malformed."""
    if not isinstance(result, list):
        raise MalformedAnswer(f"{what}: expected an instant vector, got {type(result).__name__}")
    extra = tuple(extra)
    out: dict[Labels, float] = {}
    for item in result:
        try:
            metric, (_, text) = item["metric"], item["value"]
            value = float(text)
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedAnswer(f"{what}: a sample is not {{metric, value: [t, number]}}") from exc
        if not isinstance(metric, Mapping):
            raise MalformedAnswer(f"{what}: a sample's metric is not a label map")
        key = label_key(metric, extra)
        if key in out:
            raise MalformedAnswer(f"{what}: two series share the label set {show('', key)}")
        out[key] = value
    return out


def relative_drift(recorded: float, raw: float) -> float:
    """|recorded - raw| / |raw|; equal values (zeros, infinities, NaNs) drift 0, and any
    difference from a raw 0 or a non-finite value is infinite."""
    if recorded == raw or (math.isnan(recorded) and math.isnan(raw)):
        return 0.0
    if raw == 0 or not math.isfinite(raw) or not math.isfinite(recorded):
        return math.inf
    return abs(recorded - raw) / abs(raw)


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


def worst_per_series(drifts: Iterable[SeriesDrift]) -> list[SeriesDrift]:
    """One entry per label set: its largest drift over all instants."""
    best: dict[Labels, SeriesDrift] = {}
    for d in drifts:
        if d.labels not in best or d.drift > best[d.labels].drift:
            best[d.labels] = d
    return sorted(best.values(), key=lambda d: -d.drift)


def pct(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.4%}"


def _finding(record: str, d: SeriesDrift, verdict: Verdict, threshold: float, source: str) -> Finding:
    if d.recorded is None:
        reason, observed = "SeriesMissingFromRecorded", f"raw={d.raw:g}, recorded=absent"
    elif d.raw is None:
        reason, observed = "SeriesMissingFromRaw", f"recorded={d.recorded:g}, raw=absent"
    else:
        reason = "DriftAboveThreshold" if verdict == Verdict.FAIL else "DriftInWarnBand"
        observed = f"recorded={d.recorded:g}, raw={d.raw:g}, drift={pct(d.drift)}"
    return Finding(show(record, d.labels), verdict, reason, observed, f"< {pct(threshold)}", source)


def assess_rule(
    record: str,
    drifts: list[SeriesDrift],
    threshold: float,
    warn_threshold: float | None,
    source: str,
) -> Assessment:
    """Fail at or above the threshold (one-sided series included), Warn in the warn band."""
    per_series = worst_per_series(drifts)
    paired = [d for d in per_series if d.recorded is not None and d.raw is not None]
    observed = {f"{record}.series": str(len(per_series))}
    if paired:
        observed[f"{record}.maxDrift"] = pct(max(d.drift for d in paired))
    if not any(d.recorded is not None for d in per_series):
        return Assessment(
            Verdict.INCONCLUSIVE,
            "NoRecordedSeries",
            f"{record}: no recorded series at the evaluation time",
            observed=observed,
        )
    failing = [d for d in per_series if d.drift >= threshold]
    warning = [d for d in per_series if warn_threshold is not None and warn_threshold <= d.drift < threshold]
    findings = [_finding(record, d, Verdict.FAIL, threshold, source) for d in failing]
    findings += [_finding(record, d, Verdict.WARN, threshold, source) for d in warning]
    if failing:
        top = failing[0]
        one_sided = [show(record, d.labels) for d in failing if d.recorded is None or d.raw is None]
        if top.recorded is not None and top.raw is not None:
            message = (
                f"{record}: drift {pct(top.drift)} >= {pct(threshold)} on {show(record, top.labels)} "
                f"(recorded {top.recorded:g}, raw {top.raw:g})"
            )
        else:
            message = f"{record}: series on one side only: {names(one_sided)}"
        return Assessment(Verdict.FAIL, "MetricDriftAboveThreshold", message, findings, observed)
    if warning:
        top = warning[0]
        return Assessment(
            Verdict.WARN,
            "MetricDriftInWarnBand",
            f"{record}: drift {pct(top.drift)} on {show(record, top.labels)} is within "
            f"the warn band [{pct(warn_threshold or 0)}, {pct(threshold)})",
            findings,
            observed,
        )
    top_drift = max((d.drift for d in paired), default=0.0)
    return Assessment(
        Verdict.PASS,
        "MetricDriftWithinThreshold",
        f"{record}: {len(per_series)} series, max drift {pct(top_drift)} < {pct(threshold)}",
        findings,
        observed,
    )
