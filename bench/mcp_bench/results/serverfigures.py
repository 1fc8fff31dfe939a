"""One line per metric of a level's server-side deltas, for the table views (status rows).

A level's ``server_metrics`` holds every series of every probe; a status row has room for a few
figures. Each metric the server served becomes ``<probe>/<metric>`` with its level figure summed
over label sets: a counter's increase (``+N``), a gauge's largest reading (``max N``), a
histogram's or summary's observations and mean (``n N, mean M``). A probe that could not be read
is ``unavailable: <why>``; a metric asked for and not served is ``missing``, never a zero. The
serving GPUs' samplers are summarised apart (``results.serving``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bench.observed import COUNTER, HISTOGRAM, SUMMARY
from mcp_bench.results.serving import SAMPLER_PREFIX

SKIP_PREFIXES = (SAMPLER_PREFIX,)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def metric_figure(metric: Mapping[str, Any]) -> str | None:
    """One metric's level figure, or None where it has none (vanished, type changed)."""
    status = metric.get("status")
    if status == "missing":
        return "missing"
    if status not in ("ok", "missing_before"):
        return None
    series = [s for s in metric.get("series") or [] if isinstance(s, Mapping)]
    kind = metric.get("type")
    if kind == COUNTER:
        deltas = [d for s in series if (d := _num(s.get("delta"))) is not None]
        return f"+{sum(deltas):.6g}" if deltas else None
    if kind not in (HISTOGRAM, SUMMARY):  # a gauge, or an untyped metric read as one
        peaks = [m for s in series if (m := _num(s.get("max"))) is not None]
        return f"max {max(peaks):.6g}" if peaks else None
    counts = [c for s in series if (c := _num(s.get("count"))) is not None]
    sums = [t for s in series if (t := _num(s.get("sum"))) is not None]
    if not counts:
        return None
    n = sum(counts)
    return f"n {n:.6g}, mean {sum(sums) / n:.6g}" if n > 0 and sums else f"n {n:.6g}"


def level_figures(server_metrics: Mapping[str, Any] | None) -> dict[str, str]:
    """``<probe>/<metric>`` -> figure over one level, in the probes' order, metrics sorted."""
    out: dict[str, str] = {}
    for probe, delta in (server_metrics or {}).items():
        if not isinstance(delta, Mapping) or str(probe).startswith(SKIP_PREFIXES):
            continue
        if delta.get("status") != "ok":
            out[str(probe)] = f"unavailable: {delta.get('reason') or delta.get('status')}"
            continue
        for name, metric in sorted((delta.get("metrics") or {}).items()):
            if isinstance(metric, Mapping) and (figure := metric_figure(metric)) is not None:
                out[f"{probe}/{name}"] = figure
    return out
