"""Trap 3: false wait in dynamic batching. Requests wait in the scheduler's queue for a batch to
fill while the model is mostly idle: queue time dominates the request time at low load, which
saturation cannot explain. From Triton's statistics (or its /metrics counters) per level: the
queue share of the request time, the execution busy share of the interval (compute counted once
per execution), and the mean batch size; false wait = time in the server minus execution."""

from __future__ import annotations

from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import TritonModelLevel, triton_models


def level_figures(m: TritonModelLevel) -> dict[str, float | None]:
    compute = m.infer_us + (m.input_us or 0.0) + (m.output_us or 0.0)
    request = m.request_us if m.request_us else m.queue_us + compute
    mean = m.mean_us
    queue_ms = (mean(m.queue_us) or 0.0) / 1e3
    request_ms = (mean(request) or 0.0) / 1e3
    compute_ms = (mean(compute) or 0.0) / 1e3
    return {
        "queue_ms": queue_ms,
        "compute_ms": compute_ms,
        "request_ms": request_ms,
        "false_wait_ms": max(0.0, request_ms - compute_ms),
        "queue_share": queue_ms / request_ms if request_ms > 0 else None,
        "busy_share": m.busy_fraction,
        "batch_size": m.batch_size,
        "requests": m.requests,
    }


@detector(
    3,
    "false-wait",
    "false wait in dynamic batching",
    advice="Lower the dynamic batcher's max_queue_delay_microseconds (or set preferred_batch_size to "
    "sizes the load actually fills) so requests stop waiting for a batch that never fills.",
    needs="Triton statistics per level (mcp-bench run --triton-stats MODEL, or --server-metrics triton; "
    "MCPBenchmark spec.observe.tritonStats)",
    thresholds={"queue_share": 0.3, "busy_max": 0.5, "min_queue_ms": 0.5},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    rows = []
    for level in doc.levels if doc else []:
        for m in triton_models(level):
            rows.append((level.level_label, m, level_figures(m)))
    if not rows:
        return d.no_data("no Triton statistics or queue counters in any level", t)

    def is_false_wait(f: dict[str, float | None]) -> bool:
        share, busy = f["queue_share"], f["busy_share"]
        return (
            share is not None
            and share >= t["queue_share"]
            and (f["queue_ms"] or 0.0) >= t["min_queue_ms"]
            and busy is not None
            and busy <= t["busy_max"]
        )

    hits = [r for r in rows if is_false_wait(r[2])]
    label, m, f = (
        max(hits, key=lambda r: r[2]["queue_share"] or 0.0)
        if hits
        else max(rows, key=lambda r: r[2]["queue_share"] or 0.0)
    )
    values = {"model": m.model, **f}
    src = f"{m.source} ({m.model})"
    busy = f["busy_share"]
    busy_text = "n/a" if busy is None else f"{busy:.0%}"
    summary = (
        f"queue {f['queue_ms']:.2f} ms of {f['request_ms']:.2f} ms per request "
        f"({(f['queue_share'] or 0):.0%}) while the model executed {busy_text} of the time, "
        f"batch size {f['batch_size'] or 1:.2f}"
    )
    if hits:
        return d.found(
            summary + ": waiting for batches that do not fill", t, level=label, values=values, source=src
        )
    return d.not_found(summary, t, level=label, values=values, source=src)
