"""A result document kept within the object that holds it.

Shard results and reports live in ConfigMaps (1 MiB of data). The merge keeps a report bounded
for what runs usually see, but the GPUs a run can see have no fixed bound; rather than have the
object refused, a document over the limit is shrunk, least valuable first, and says so in its
notes:

1. the plot's points halved, step by step, then the plot dropped;
2. per-GPU entries cut to the GPUs at both ends of SM utilisation (the figures of the fairness
   across all GPUs stay; their per-GPU shares go);
3. the server metrics' timelines (the deltas stay);
4. the histograms of the per-class and per-shape breakdowns (their latency tables stay).

Latency histograms, counts and the SLO verdict are never touched: they are the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mcp_bench.results.document import ResultDocument, dumps_document
from mcp_bench.results.gpumerge import downsample

GPU_STEPS = (64, 32, 16, 8, 4, 2)

Step = Callable[[ResultDocument], str | None]


def _plot_owner(doc: ResultDocument) -> dict[str, Any] | None:
    """The run's telemetry while it still has a plot."""
    tel = doc.telemetry
    if not isinstance(tel, dict) or not isinstance(tel.get("plot"), dict):
        return None
    return None if tel["plot"].get("status") == "dropped" else tel


def _plot_points(plot: dict[str, Any]) -> int:
    if "series" in plot:  # merged: every shard's series at one number of points
        return int(plot.get("points") or 0)
    return len(plot.get("t_s") or [])


def _halve_plot(doc: ResultDocument) -> str | None:
    owner = _plot_owner(doc)
    if owner is None:
        return None
    plot = owner["plot"]
    points = _plot_points(plot) // 2
    if points < 2:
        owner["plot"] = {"status": "dropped", "reason": "the document had to fit its object"}
        return "plot dropped"
    if "series" in plot:
        series = [{"shard": s.get("shard"), **downsample(s, points)} for s in plot["series"]]
        owner["plot"] = {**plot, "points": points, "series": series}
    else:
        owner["plot"] = downsample(plot, points)
    return f"plot down to {points} points"


def _sm_mean(gpu: dict[str, Any]) -> float:
    sm = (gpu.get("fields") or {}).get("sm_util_pct")
    mean = sm.get("mean") if isinstance(sm, dict) else None
    return float(mean) if isinstance(mean, int | float) else -1.0


def _telemetries(doc: ResultDocument) -> Iterator[dict[str, Any]]:
    for tel in [doc.telemetry, *(level.telemetry for level in doc.levels)]:
        if isinstance(tel, dict):
            yield tel


def _cut_gpus(keep: int) -> Step:
    def step(doc: ResultDocument) -> str | None:
        cut = False
        for tel in _telemetries(doc):
            gpus = tel.get("gpus")
            if not isinstance(gpus, list) or len(gpus) <= keep:
                continue
            ranked = sorted(gpus, key=_sm_mean)  # both ends: the idlest and the busiest
            kept = {id(g) for g in ranked[: keep // 2] + ranked[len(ranked) - (keep - keep // 2) :]}
            tel.setdefault("gpus_total", len(gpus))
            tel["gpus"] = [g for g in gpus if id(g) in kept]
            if isinstance(tel.get("fairness"), dict):
                tel["fairness"].pop("shares", None)
            cut = True
        return (
            f"per-GPU entries cut to {keep} per level (idlest and busiest by SM utilisation)" if cut else None
        )

    return step


def _drop_timelines(doc: ResultDocument) -> str | None:
    dropped = False
    for level in doc.levels:
        for delta in (level.server_metrics or {}).values():
            if isinstance(delta, dict) and delta.pop("timeline", None) is not None:
                dropped = True
    return "server-metric timelines dropped" if dropped else None


def _drop_breakdown_histograms(doc: ResultDocument) -> str | None:
    dropped = False
    for level in doc.levels:
        for tags in (level.breakdown or {}).values():
            for tag in tags.values():
                if tag.histograms:
                    tag.histograms = {}
                    dropped = True
    return "breakdown histograms dropped" if dropped else None


def _steps(doc: ResultDocument) -> Iterator[Step]:
    while _plot_owner(doc) is not None:
        yield _halve_plot
    for keep in GPU_STEPS:
        yield _cut_gpus(keep)
    yield _drop_timelines
    yield _drop_breakdown_histograms


def dumps_within(doc: ResultDocument, limit: int, key: bytes | None = None) -> str:
    """``dumps_document(doc, key)``, shrunk step by step (see above) while it is over ``limit``
    bytes, each step named in a note; the smallest it can make when even that is over. ``doc``
    itself is left as it is."""
    text = dumps_document(doc, key)
    if len(text.encode()) <= limit:
        return text
    work = doc.model_copy(deep=True)
    done: list[str] = []
    for step in _steps(work):
        what = step(work)
        if what is None:
            continue
        done = [d for d in done if not d.startswith(what.split(" ")[0])] + [what]
        note = f"shrunk to fit {limit} bytes: {'; '.join(done)}"
        text = dumps_document(work.model_copy(update={"notes": [*work.notes, note]}), key)
        if len(text.encode()) <= limit:
            break
    return text
