"""Where request payloads come from: the plan's fixed payload, or a workload from mcp_bench.workload."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from mcp_bench.plan import RunPlan
from mcp_bench.records import RequestPayload


def fixed_payload(plan: RunPlan) -> RequestPayload:
    p = plan.payload
    extra = dict(p.options)
    extra.setdefault("stream", p.stream)
    return RequestPayload(
        prompt=p.prompt,
        input_tokens=p.input_tokens,
        max_output_tokens=p.max_output_tokens,
        body=None if p.body is None else p.body.encode("utf-8"),
        extra=extra,
    )


def payload_source(plan: RunPlan) -> Iterator[RequestPayload]:
    """An endless payload iterator; the fixed payload is one shared object (no per-request allocation)."""
    if plan.payload.workload is None:
        return itertools.repeat(fixed_payload(plan))
    from pydantic import TypeAdapter

    from mcp_bench import workload as wl

    spec = TypeAdapter(wl.Workload).validate_python(plan.payload.workload)
    return wl.payloads(spec)
