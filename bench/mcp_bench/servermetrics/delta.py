"""What changed on the server during one level: the difference of two snapshots.

Counters: delta and rate (a counter that went down was reset: the delta is then its new value, as
Prometheus' ``increase`` treats it, and ``reset`` says so). Histograms: delta count, sum, mean and
quantiles from the delta buckets (linear interpolation inside a bucket, as ``histogram_quantile``).
Summaries: delta count, sum and mean. Gauges: before, after and the larger of the two. A metric that
was asked for and is absent is reported ``missing``, never as zero; a failed snapshot makes the
whole delta ``unavailable`` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from mcp_bench.observed import COUNTER, GAUGE, HISTOGRAM, SUMMARY
from mcp_bench.servermetrics.snapshot import Distribution, Family, LabelKey, Snapshot

QUANTILES = (0.5, 0.9, 0.95, 0.99)


def histogram_quantile(q: float, buckets: tuple[tuple[float, float], ...]) -> float | None:
    """Quantile from cumulative buckets (+Inf last), as Prometheus' ``histogram_quantile`` computes it.

    None when there are no observations. A rank that falls in the +Inf bucket answers the largest
    finite bound (the histogram cannot say more).
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within 0..1, got {q}")
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    for i, (bound, count) in enumerate(buckets):
        if count < rank:
            continue
        if bound == math.inf:
            return buckets[i - 1][0] if i > 0 else None
        if i == 0 and bound <= 0:
            return bound
        lower, below = (0.0, 0.0) if i == 0 else buckets[i - 1]
        if count == below:
            return bound
        return lower + (bound - lower) * (rank - below) / (count - below)
    return None


def _labels(key: LabelKey) -> dict[str, str]:
    return dict(key)


def _counter_series(key: LabelKey, b: float | None, a: float | None, seconds: float) -> dict[str, Any]:
    row: dict[str, Any] = {"labels": _labels(key), "before": b, "after": a}
    if a is None:
        row["status"] = "vanished"
        row["delta"] = None
        return row
    if b is None:
        row["status"] = "appeared"  # new label set: counted from zero, as Prometheus client libraries start
        d, reset = a, False
    else:
        reset = a < b
        d = a if reset else a - b
    row.update(delta=d, rate_per_s=d / seconds if seconds > 0 else None, reset=reset)
    return row


def _gauge_series(key: LabelKey, b: float | None, a: float | None) -> dict[str, Any]:
    present = [v for v in (b, a) if v is not None]
    return {"labels": _labels(key), "before": b, "after": a, "max": max(present) if present else None}


def _delta_buckets(b: Distribution, a: Distribution) -> tuple[tuple[float, float], ...] | None:
    before = dict(b.buckets)
    if set(before) != {le for le, _ in a.buckets}:
        return None  # bucket layout changed: no meaningful difference
    return tuple((le, count - before[le]) for le, count in a.buckets)


def _distribution_series(key: LabelKey, b: Distribution | None, a: Distribution | None) -> dict[str, Any]:
    row: dict[str, Any] = {"labels": _labels(key)}
    if a is None:
        return {**row, "status": "vanished"}
    reset = b is not None and a.count < b.count
    base = None if b is None or reset else b
    count = a.count - (base.count if base else 0.0)
    total = a.sum - (base.sum if base else 0.0)
    row.update(count=count, sum=total, mean=total / count if count > 0 else None, reset=reset)
    if b is None:
        row["status"] = "appeared"
    if a.buckets:
        buckets = a.buckets if base is None else _delta_buckets(base, a)
        if buckets is None:
            row["quantiles_status"] = "bucket layout changed between snapshots"
        for q in QUANTILES:
            row[f"p{round(q * 100)}"] = None if buckets is None else histogram_quantile(q, buckets)
    return row


def family_delta(b: Family | None, a: Family | None, seconds: float) -> dict[str, Any]:
    """The delta of one metric; ``missing_before``/``missing_after`` when only one snapshot has it."""
    fam = a or b
    assert fam is not None
    out: dict[str, Any] = {"type": fam.type, "status": "ok"}
    if a is None:
        out["status"] = "missing_after"
    elif b is None:
        out["status"] = "missing_before"
    elif a.type != b.type:
        return {"type": a.type, "status": "type_changed", "reason": f"was {b.type}, now {a.type}"}
    if fam.type in (HISTOGRAM, SUMMARY):
        bd = b.distributions if b else {}
        ad = a.distributions if a else {}
        out["series"] = [_distribution_series(k, bd.get(k), ad.get(k)) for k in sorted(set(bd) | set(ad))]
        return out
    bv = b.values if b else {}
    av = a.values if a else {}
    keys = sorted(set(bv) | set(av))
    if fam.type == COUNTER:
        series = [_counter_series(k, bv.get(k), av.get(k), seconds) for k in keys]
        out["series"] = series
        deltas = [s["delta"] for s in series]
        if deltas and all(d is not None for d in deltas):
            out["total_delta"] = sum(deltas)
            out["total_rate_per_s"] = out["total_delta"] / seconds if seconds > 0 else None
        return out
    out["series"] = [_gauge_series(k, bv.get(k), av.get(k)) for k in keys]
    if fam.type != GAUGE:
        out["note"] = "untyped metric: reported as a gauge"
    return out


def delta(before: Snapshot, after: Snapshot, expected: Iterable[str] = ()) -> dict[str, Any]:
    """Per-metric deltas between two snapshots of the same source; ``expected`` names must be present."""
    seconds = (after.taken_ns - before.taken_ns) / 1e9
    out: dict[str, Any] = {
        "source": after.source,
        "kind": after.kind,
        "before_at": before.taken_at,
        "after_at": after.taken_at,
        "interval_s": seconds,
    }
    failed = [(tag, s) for tag, s in (("before", before), ("after", after)) if not s.ok]
    if failed:
        reasons = "; ".join(f"{tag}: {s.error_kind} {s.error}" for tag, s in failed)
        return {**out, "status": "unavailable", "reason": reasons}
    names = sorted(set(before.families) | set(after.families))
    metrics = {n: family_delta(before.families.get(n), after.families.get(n), seconds) for n in names}
    for name in expected:
        if name not in metrics:
            metrics[name] = {"status": "missing", "reason": "not exposed by the server in either snapshot"}
    missing = sorted(n for n, m in metrics.items() if m["status"] == "missing")
    return {**out, "status": "ok", "metrics": metrics, "missing": missing}
