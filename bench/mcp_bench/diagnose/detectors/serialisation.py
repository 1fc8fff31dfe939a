"""Trap 11: HTTP/gRPC serialisation bottleneck. Encoding and decoding cost more than the model.
Judged on what the client timed: the same payload run over the other protocol (``compare``), HTTP
latency against gRPC's at the same level. Triton's compute_input + compute_output against
compute_infer is the server's account of itself: shown beside the verdict, never the verdict
alone (a server can report any codec time; the reference server writes it on purpose).
(Client-side encode/decode time is not measured by the benchmark.)"""

from __future__ import annotations

from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import triton_models
from mcp_bench.results.document import ResultDocument


def protocol(doc: ResultDocument) -> str | None:
    backend = doc.plan.backend
    if "grpc" in backend:
        return "grpc"
    return "http" if backend in ("triton-http", "http", "openai", "openai-chat") else None


def p50(doc: ResultDocument, index: int) -> float | None:
    if index >= len(doc.levels):
        return None
    table = doc.levels[index].latency.get("e2e")
    return None if table is None else table.p50_ms


@detector(
    11,
    "serialisation",
    "HTTP/gRPC serialisation bottleneck",
    advice="Send large tensors over gRPC or with the binary tensor extension, or through shared memory "
    "(system or CUDA), so encoding stops costing more than the model.",
    needs="the same payload run over HTTP and gRPC (the other run as --compare); Triton statistics "
    "(--triton-stats MODEL) are shown beside it",
    thresholds={"http_over_grpc": 1.3},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    values: dict[str, float | str | None] = {}
    reasons: list[str] = []
    sources: list[str] = []
    hit = False
    judged = False  # only by the client's own timing
    best = None
    for level in doc.levels if doc else []:
        for m in triton_models(level):
            if m.input_us is None or m.output_us is None or m.infer_us <= 0:
                continue
            share = (m.input_us + m.output_us) / m.infer_us
            if best is None or share > best[1]:
                best = (level.level_label, share, m)
    level_label = None
    if best is not None:
        level_label, share, m = best
        values.update(codec_share=share, codec_ms=((m.input_us or 0) + (m.output_us or 0)) / m.requests / 1e3)
        values["infer_ms"] = m.infer_us / m.requests / 1e3
        sources.append(f"{m.source} ({m.model})")
        reasons.append(f"the server reports decode+encode at {share:.0%} of compute_infer")
    if doc is not None and inputs.compare is not None:
        kinds = {protocol(doc): doc, protocol(inputs.compare): inputs.compare}
        if set(kinds) == {"http", "grpc"}:
            http, grpc = kinds["http"], kinds["grpc"]
            ratios = []
            for i in range(min(len(http.levels), len(grpc.levels))):
                a, b = p50(http, i), p50(grpc, i)
                if a and b:
                    ratios.append((i, a, b, a / b))
            if ratios:
                i, a, b, r = max(ratios, key=lambda x: x[3])
                judged = True
                level_label = level_label or http.levels[i].level_label
                values.update(http_p50_ms=a, grpc_p50_ms=b, http_over_grpc=r)
                sources.append("client latency, HTTP run against gRPC run")
                reasons.append(f"HTTP P50 {a:.2f} ms against gRPC {b:.2f} ms ({r:.2f}x)")
                hit = r >= t["http_over_grpc"]
    if not judged:
        why = "; ".join(reasons) + "; " if reasons else ""
        return d.no_data(
            f"{why}no HTTP/gRPC pair of runs of the same payload timed by the client", t, values=values
        )
    summary = "; ".join(reasons)
    return (d.found if hit else d.not_found)(
        summary, t, level=level_label, values=values, source=", ".join(sources)
    )
