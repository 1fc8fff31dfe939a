"""Trap 4: the FP16/INT4 precision-throughput breakpoint. A lower precision that does not pay:
some layers get slower (dequantisation, no native kernel) and outputs drift. Read from a
profiler trace (GPU time per layer where the trace has it): per-layer latency outliers beyond
2.5 standard deviations of their peers; with a second run (``compare``) of the other precision,
the throughput gain is reported beside it."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.trace import GPU_ANNOTATION_CATS, Span, Trace
from mcp_bench.results.document import ResultDocument

LAYER = re.compile(r"(?i)(layer|block)")
DIGITS = re.compile(r"\d+")


def layer_spans(trace: Trace) -> list[Span]:
    """Numbered layer spans; as the GPU ran them when the trace has those (the PyTorch profiler's
    ``gpu_user_annotation``), since a CPU range only times the launches of an asynchronous layer."""
    spans = [s for s in trace.spans if LAYER.search(s.name) and DIGITS.search(s.name)]
    gpu = [s for s in spans if s.cat in GPU_ANNOTATION_CATS]
    return gpu or spans


def layer_outliers(trace: Trace, min_layers: int) -> tuple[int, list[tuple[str, float, float, float]]]:
    """(layers looked at, outliers as (name, mean us, peers' mean us, z)): a layer's mean duration
    against the other layers of the same kind (the name with its numbers taken out), leave one out."""
    per_name: dict[str, list[float]] = defaultdict(list)
    for s in layer_spans(trace):
        per_name[s.name].append(s.dur_us)
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for name, durs in per_name.items():
        groups[DIGITS.sub("#", name)][name] = sum(durs) / len(durs)
    looked = 0
    out = []
    for members in groups.values():
        if len(members) < min_layers:
            continue
        looked += len(members)
        for name, mean in members.items():
            others = [v for n, v in members.items() if n != name]
            mu = sum(others) / len(others)
            sd = math.sqrt(sum((v - mu) ** 2 for v in others) / len(others))
            sd = max(sd, 0.01 * mu)
            z = (mean - mu) / sd if sd > 0 else 0.0
            out.append((name, mean, mu, z))
    return looked, out


def throughput(doc: ResultDocument) -> float | None:
    rates = [lv.throughput_rps for lv in doc.levels if lv.throughput_rps]
    return max(rates) if rates else None


@detector(
    4,
    "precision-breakpoint",
    "FP16/INT4 precision-throughput breakpoint",
    advice="Keep the outlier layers in FP16 (mixed precision) or use kernels with native low-precision "
    "support for them; check output alignment before trading precision for throughput.",
    needs="a profiler trace with per-layer spans (--trace, e.g. torch.profiler with_modules or "
    "record_function per layer); for the gain, a run of the other precision (--compare)",
    thresholds={"z": 2.5, "min_excess": 0.1, "min_layers": 4.0},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    values: dict[str, float | str | None] = {}
    if inputs.document is not None and inputs.compare is not None:
        a, b = throughput(inputs.document), throughput(inputs.compare)
        if a and b:
            values["throughput_gain"] = a / b
    if inputs.trace is None:
        return d.no_data("no profiler trace with per-layer spans", t, values=values)
    looked, rows = layer_outliers(inputs.trace, int(t["min_layers"]))
    if not looked:
        return d.no_data(
            f"no group of at least {t['min_layers']:g} numbered layer spans in the trace",
            t,
            values=values,
            source=inputs.trace.source,
        )
    bad = [r for r in rows if r[3] >= t["z"] and r[1] >= r[2] * (1 + t["min_excess"])]
    worst = max(bad or rows, key=lambda r: r[3])
    values.update(
        layers=looked,
        outliers=len(bad),
        worst_layer=worst[0],
        worst_us=worst[1],
        peers_us=worst[2],
        z=worst[3],
    )
    src = f"trace {inputs.trace.source}"
    if bad:
        return d.found(
            f"{len(bad)} of {looked} layers beyond {t['z']:g} sigma: {worst[0]} {worst[1]:.0f} us "
            f"against {worst[2]:.0f} us for its peers",
            t,
            values=values,
            source=src,
        )
    return d.not_found(
        f"no layer beyond {t['z']:g} sigma of its peers ({looked} layers)", t, values=values, source=src
    )
