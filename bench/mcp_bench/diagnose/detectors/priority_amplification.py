"""Trap 8: a priority queue amplifying SLO violations. Under strict priorities the high class
stays within its SLO while the low class's tail explodes (the guide's case: P99 120 -> 890 ms
against a 500 ms SLO). From per-class latency (``LevelResult.breakdown['class']``, when the plan
has request classes with priorities): per level, the lowest class's P99 against its SLO and against
its own P99 at the lightest level (uncontended), while the highest class meets its SLO; and the low
class's P99 well above the high class's in the same level, against the ratio of their P50s
uncontended (under FIFO both slow down alike: load, not priority)."""

from __future__ import annotations

from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import breakdown, latency_name, load_of, tag_table
from mcp_bench.plan import RequestClass, RunPlan
from mcp_bench.results.document import LevelResult, ResultDocument


def class_p99(doc: ResultDocument, level: LevelResult, name: str) -> float | None:
    return _class_quantile(doc, level, name, "p99_ms")


def class_p50(doc: ResultDocument, level: LevelResult, name: str) -> float | None:
    return _class_quantile(doc, level, name, "p50_ms")


def _class_quantile(doc: ResultDocument, level: LevelResult, name: str, field: str) -> float | None:
    tag = breakdown(level, "class").get(name)
    if tag is None:
        return None
    table = tag_table(tag, latency_name(doc, level))
    value = None if table is None else getattr(table, field)
    return None if value is None else float(value)


def slo_of(plan: RunPlan, cls: RequestClass) -> float | None:
    return cls.latency_p99_ms or plan.slo.latency_p99_ms


@detector(
    8,
    "priority-amplification",
    "priority queue amplifying SLO violations",
    advice="Bound the low class's wait (aging, weighted fair queueing, a reserved share of capacity or "
    "admission control at the front door) instead of strict priority.",
    needs="request classes with different priorities in the workload (plan payload.classes; "
    "MCPBenchmark spec.workload.classes) so latency is reported per class",
    thresholds={"amplification": 3.0, "relative_amplification": 2.0},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    if doc is None:
        return d.no_data("no result document", t)
    classes = [c for c in doc.plan.payload.classes if c.priority is not None]
    if len({c.priority for c in classes}) < 2 or not any(lv.breakdown for lv in doc.levels):
        return d.no_data("the run has no request classes of different priorities", t)
    # vLLM's convention: a lower number is served first
    high = min(classes, key=lambda c: c.priority or 0)
    low = max(classes, key=lambda c: c.priority or 0)
    ordered = sorted(doc.levels, key=load_of)
    light = ordered[0]
    base_low = class_p99(doc, light, low.name)
    base_high = class_p99(doc, light, high.name)
    rows = []
    for level in ordered:
        lp, hp = class_p99(doc, level, low.name), class_p99(doc, level, high.name)
        if lp is None or hp is None:
            continue
        rows.append((level, lp, hp))
    if not rows:
        return d.no_data(f"no level with latency for both {high.name} and {low.name}", t)
    slo_low, slo_high = slo_of(doc.plan, low), slo_of(doc.plan, high)
    several = len(rows) > 1 and base_low is not None

    # what the two classes cost each other uncontended: their P50s at the lightest level (a P99
    # of one request at a time is a few slow requests, and on a busy host they decide a ratio)
    p50_low, p50_high = class_p50(doc, light, low.name), class_p50(doc, light, high.name)
    uncontended_ratio = p50_low / p50_high if several and p50_low and p50_high else 1.0

    def judge(lp: float, hp: float) -> tuple[bool, float | None, float | None]:
        """(trap, the low class's amplification, the high class's)."""
        amp = lp / base_low if several and base_low else (lp / hp if hp else None)
        high_amp = hp / base_high if several and base_high else None
        amplified = amp is not None and amp >= t["amplification"]
        # the low class slowed well beyond the high one in the same window, against how they
        # compare uncontended: the priority, not the load alone (under FIFO both slow alike)
        unequal = hp > 0 and lp / hp >= uncontended_ratio * t["relative_amplification"]
        if slo_low is not None and slo_high is not None:
            return lp > slo_low and hp <= slo_high and amplified and unequal, amp, high_amp
        return amplified and unequal, amp, high_amp

    judged = [(lv, lp, hp, *judge(lp, hp)) for lv, lp, hp in rows]
    hits = [r for r in judged if r[3]]
    level, lp, hp, _, amp, high_amp = max(hits or judged, key=lambda r: r[4] or 0.0)
    values = {
        "high_class": high.name,
        "low_class": low.name,
        "high_p99_ms": hp,
        "low_p99_ms": lp,
        "low_uncontended_p99_ms": base_low if several else None,
        "amplification": amp,
        "high_amplification": high_amp,
        "low_slo_ms": slo_low,
        "high_slo_ms": slo_high,
    }
    basis = (
        f"its uncontended {base_low:.0f} ms at {light.level_label}"
        if several and base_low
        else f"{high.name}'s P99"
    )
    slo_text = f" against a {slo_low:.0f} ms SLO" if slo_low else ""
    summary = (
        f"{low.name} P99 {lp:.0f} ms{slo_text} ({amp or 0:.1f}x {basis}) while {high.name} P99 is {hp:.0f} ms"
    )
    src = "client per-class latency"
    if hits:
        return d.found(summary, t, level=level.level_label, values=values, source=src)
    return d.not_found(summary, t, level=level.level_label, values=values, source=src)
