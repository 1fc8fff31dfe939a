"""Trap 12: dynamic-shape recompile avalanche. Every new input shape costs a compile (graph
capture, engine profile, torch.compile guard failure) on its first request. From a shape sweep the
benchmark runs on purpose (``LevelResult.breakdown['shape']``): the first hit of each shape in the
run against the same shape warm (its median). The server's compile counters (a counter whose
name has ``compile`` in it) are shown beside it but never decide: any counter so named reaching
two would otherwise be an avalanche, with no request seen paying for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import breakdown, probe_deltas
from mcp_bench.results.document import ResultDocument


def first_hits(doc: ResultDocument) -> dict[str, tuple[str, float, float]]:
    """Per shape: (level, first-hit ms, warm median ms), from the first level the shape appears in."""
    out: dict[str, tuple[str, float, float]] = {}
    for level in doc.levels:
        for shape, tag in breakdown(level, "shape").items():
            if shape in out or tag.first_latency_ms is None:
                continue
            table = tag.latency.get("e2e")
            if table is None or table.p50_ms is None or table.count < 2:
                continue
            out[shape] = (level.level_label, tag.first_latency_ms, table.p50_ms)
    return out


def compile_counters(doc: ResultDocument) -> dict[str, float]:
    totals: dict[str, float] = {}
    for level in doc.levels:
        for delta in probe_deltas(level).values():
            for name, m in delta.get("metrics", {}).items():
                if (
                    "compile" in name.lower()
                    and isinstance(m, dict)
                    and m.get("type") == "counter"
                    and m.get("total_delta") is not None
                ):
                    totals[name] = totals.get(name, 0.0) + float(m["total_delta"])
    return totals


@detector(
    12,
    "recompile-avalanche",
    "dynamic-shape recompile avalanche",
    advice="Pad inputs to a few shape buckets and warm every bucket up before serving (or mark the "
    "dimensions dynamic / build optimisation profiles for the range).",
    needs="a shape sweep in the workload (plan payload.shape_sweep; MCPBenchmark spec.workload.shapeSweep) "
    "without warm-up; the server's compile counters (--server-metrics) are shown beside it",
    thresholds={"first_over_warm": 5.0, "min_penalty_ms": 20.0, "min_shapes": 2.0},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    if doc is None:
        return d.no_data("no result document", t)
    hits = first_hits(doc)
    compiles = compile_counters(doc)
    if len(hits) < 2:
        counted = f"{sum(compiles.values()):.0f} compiles counted by the server, but " if compiles else ""
        counts = {"compiles": sum(compiles.values())} if compiles else {}
        return d.no_data(f"{counted}no shape sweep (two or more shapes) shows a first hit", t, values=counts)
    slow = {
        s: v
        for s, v in hits.items()
        if v[1] >= v[2] * t["first_over_warm"] and v[1] - v[2] >= t["min_penalty_ms"]
    }
    values: dict[str, Any] = {"shapes": len(hits), "slow_first_hits": len(slow)}
    compiled = sum(compiles.values())
    if compiles:
        values["compiles"] = compiled
    level = None
    parts = []
    if hits:
        key = max(slow or hits, key=lambda s: hits[s][1] - hits[s][2])
        level, first, warm = hits[key]
        values.update(
            worst_shape=key, first_hit_ms=first, warm_p50_ms=warm, ratio=first / warm if warm else None
        )
        parts.append(
            f"{len(slow)} of {len(hits)} shapes paid a first hit (worst: shape {key}, {first:.0f} ms "
            f"against {warm:.0f} ms warm)"
        )
    if compiles:
        parts.append(f"{compiled:.0f} compiles counted by the server")
    if doc.plan.stage.warmup_s > 0 and hits:
        parts.append("note: warm-up requests are not measured and may hide first hits")
    found = len(slow) >= t["min_shapes"]  # first hits the client saw; counters only corroborate
    src = "client per-shape latency" + (", server compile counters" if compiles else "")
    return (d.found if found else d.not_found)("; ".join(parts), t, level=level, values=values, source=src)
