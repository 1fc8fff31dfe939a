"""GPU telemetry of several shards merged into one bounded summary.

Each shard summarises the GPUs it sampled (:mod:`mcp_bench.telemetry.stats`). Kept side by side,
those summaries and their plots made a report grow with shards x GPUs past what its object holds.
Merged, a level keeps one compact entry per distinct GPU (figures to 6 significant digits; a GPU
two shards both saw, by UUID, once), the run's fairness across all of them, and the run's plot
shares a fixed budget of numbers out over every shard's series. Readers see the shape of one
shard's summary (``status``, ``gpus``, ``fairness``), so the detectors, the report table and the
chart read a merged document as they read a shard's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mcp_bench.fairness import fairness
from mcp_bench.observed import STATUS_OK

PLOT_VALUES = 20_000  # numbers in a merged plot, over all shards, GPUs and fields
FIGURE_DIGITS = 6
PLOT_DIGITS = 4

Part = Mapping[str, Any] | str | None


def rounded(value: Any, digits: int) -> Any:
    """Every float in a JSON-like value to ``digits`` significant digits (ints, strings as they are)."""
    if isinstance(value, float):
        return value if not math.isfinite(value) or value == 0.0 else float(f"{value:.{digits}g}")
    if isinstance(value, Mapping):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    return value


def _worst(values: Sequence[Any]) -> Any:
    """Per figure, the largest any shard reported (the worst case of a jitter or a cost); for
    anything else the first shard's."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return max(present)
    if all(isinstance(v, Mapping) for v in present):
        keys = list(dict.fromkeys(k for v in present for k in v))
        return {k: _worst([v.get(k) for v in present]) for k in keys}
    return present[0]


def _why(part: Part) -> str:
    if not isinstance(part, Mapping):
        return "no telemetry"
    reason = part.get("reason")
    return f"{part.get('status')}: {reason}" if reason else str(part.get("status"))


def _distinct_gpus(ok: Sequence[tuple[int, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    seen: set[str] = set()
    for shard, part in ok:
        for gpu in part.get("gpus") or []:
            if not isinstance(gpu, Mapping):
                continue
            uuid = str(gpu.get("uuid") or "")
            if uuid and uuid in seen:
                continue  # two shards on one node saw the same device over the same time
            seen.add(uuid)
            gpus.append({"shard": shard, **rounded(gpu, FIGURE_DIGITS)})
    return gpus


def _share(gpu: Mapping[str, Any]) -> float | None:
    """A GPU's mean SM utilisation as a fraction (as ``fairness.utilisation_shares`` takes it)."""
    sm = (gpu.get("fields") or {}).get("sm_util_pct")
    if not isinstance(sm, Mapping) or sm.get("status") != STATUS_OK or sm.get("mean") is None:
        return None
    return min(1.0, max(0.0, float(sm["mean"]) / 100.0))


def gpus_fairness(gpus: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Fairness across every GPU of the run, keyed ``shard<i>/gpu<index>``."""
    shares = {
        f"shard{g.get('shard')}/gpu{g.get('index')}": share for g in gpus if (share := _share(g)) is not None
    }
    if not shares:
        return {"status": "no_data", "reason": "no SM utilisation readings in the window"}
    return rounded({"status": STATUS_OK, "shares": shares, **fairness(shares).to_dict()}, FIGURE_DIGITS)


def downsample(plot: Mapping[str, Any], points: int) -> dict[str, Any]:
    """A plot (``t_s`` and per-GPU series, as ``stats.plot_points`` makes it) in at most
    ``points`` points: bucket means, None where a bucket has no reading."""
    t_s = list(plot.get("t_s") or [])
    n = len(t_s)
    size = max(1, math.ceil(n / max(1, points)))
    buckets = [range(i, min(i + size, n)) for i in range(0, n, size)]

    def mean(values: Sequence[Any], idx: range) -> float | None:
        real = [float(values[i]) for i in idx if i < len(values) and values[i] is not None]
        return rounded(math.fsum(real) / len(real), PLOT_DIGITS) if real else None

    gpus = [
        {
            key: (values if key == "index" else [mean(values, b) for b in buckets])
            for key, values in gpu.items()
        }
        for gpu in plot.get("gpus") or []
    ]
    return {"t_s": [rounded(float(t_s[b[0]]), PLOT_DIGITS) for b in buckets], "gpus": gpus}


def values_per_point(plot: Mapping[str, Any]) -> int:
    """Numbers one point of a plot takes: its time and one per GPU and field."""
    return 1 + sum(len([k for k in gpu if k != "index"]) for gpu in plot.get("gpus") or [])


def merge_plots(plots: Sequence[tuple[int, Mapping[str, Any]]], budget: int = PLOT_VALUES) -> dict[str, Any]:
    """Every shard's plot, down-sampled to one number of points so that all of them together
    hold at most ``budget`` numbers; dropped (saying why) when not even two points each fit."""
    per_point = sum(values_per_point(plot) for _, plot in plots)
    longest = max(len(plot.get("t_s") or []) for _, plot in plots)
    points = min(longest, budget // max(1, per_point))
    if points < 2:
        return {
            "status": "dropped",
            "reason": f"{per_point} series of {len(plots)} shards do not fit {budget} numbers",
        }
    return {
        "status": STATUS_OK,
        "points": points,
        "series": [{"shard": shard, **downsample(plot, points)} for shard, plot in plots],
    }


def merge_telemetry(parts: Sequence[Part], plot_budget: int = PLOT_VALUES) -> dict[str, Any] | None:
    """One summary of every shard's telemetry of a level (or of the run), bounded by the GPUs the
    run saw rather than by shards x their documents; None when no shard had any. One shard's
    summary is kept as it is."""
    present = [(i, p) for i, p in enumerate(parts) if isinstance(p, Mapping)]
    if not present:
        return None
    if len(parts) == 1:
        return dict(present[0][1])
    ok = [(i, p) for i, p in present if p.get("status") == STATUS_OK]
    by_reason: dict[str, list[int]] = {}
    for i, part in enumerate(parts):
        if not (isinstance(part, Mapping) and part.get("status") == STATUS_OK):
            by_reason.setdefault(_why(part), []).append(i)
    role = {"role": present[0][1]["role"]} if present[0][1].get("role") else {}
    if not ok:
        first = present[0][1]
        return {
            **role,
            "status": first.get("status"),
            "reason": first.get("reason"),
            "shards_without": by_reason,
        }
    gpus = _distinct_gpus(ok)
    expected = [p.get("expected_samples") for _, p in ok]
    merged: dict[str, Any] = {
        **role,
        "status": STATUS_OK,
        "shards_merged": len(ok),
        "samples": sum(int(p.get("samples") or 0) for _, p in ok),
        "expected_samples": None if None in expected else sum(int(e or 0) for e in expected),
        "complete": all(p.get("complete") is True for _, p in ok),
        "sampler": rounded(_worst([p.get("sampler") for _, p in ok]), FIGURE_DIGITS),
        "sampler_cost": rounded(_worst([p.get("sampler_cost") for _, p in ok]), FIGURE_DIGITS),
        "gpus": gpus,
    }
    if by_reason:
        merged["shards_without"] = by_reason
    errors: Counter[str] = Counter()
    for _, part in ok:
        errors.update({str(k): int(v) for k, v in (part.get("read_errors") or {}).items()})
    if errors:
        merged["read_errors"] = dict(errors)
    if len(gpus) > 1:
        merged["fairness"] = gpus_fairness(gpus)
    plots = [(i, p["plot"]) for i, p in ok if isinstance(p.get("plot"), Mapping)]
    if plots:
        merged["plot"] = merge_plots(plots, plot_budget)
    return merged
