"""Where request payloads come from: the plan's fixed payload, a workload from mcp_bench.workload,
or a shape sweep; then, when the plan has request classes, each payload is drawn into one; then
images (content parts or V2 tensors, mcp_bench.multimodal) are added, the class's or the plan's."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence

from mcp_bench.multimodal import MediaSource
from mcp_bench.plan import Payload, RequestClass, RunPlan, ShapeSweep
from mcp_bench.records import RequestPayload

CLASS_TAG = "class"
SHAPE_TAG = "shape"


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


def shape_sweep_payloads(base: RequestPayload, sweep: ShapeSweep) -> Iterator[RequestPayload]:
    """``repeats`` requests of each prompt length in turn, cycling; each tagged with its shape.

    The prompt of length n is n whitespace words (one token each for common tokenizers), built
    once per shape, so the sweep costs nothing per request.
    """
    prompts = {n: " ".join(["the"] * n) for n in sweep.input_tokens}
    while True:
        for n in sweep.input_tokens:
            tags = {SHAPE_TAG: str(n)}
            for _ in range(sweep.repeats):
                yield RequestPayload(
                    prompt=prompts[n],
                    input_tokens=n,
                    max_output_tokens=base.max_output_tokens,
                    body=base.body,
                    extra=base.extra,
                    tags=tags,
                )


def classed(
    source: Iterator[RequestPayload], classes: Sequence[RequestClass], seed: int
) -> Iterator[RequestPayload]:
    """Each payload drawn into a class by weight (seeded), carrying its priority and its class tag."""
    rng = random.Random(seed)
    weights = [c.weight for c in classes]
    for payload in source:
        cls = rng.choices(classes, weights)[0]
        extra = payload.extra if cls.priority is None else {**payload.extra, "priority": cls.priority}
        yield RequestPayload(
            prompt=payload.prompt,
            input_tokens=payload.input_tokens,
            max_output_tokens=payload.max_output_tokens,
            body=payload.body,
            extra=extra,
            tags={**(payload.tags or {}), CLASS_TAG: cls.name},
        )


def with_media(source: Iterator[RequestPayload], p: Payload) -> Iterator[RequestPayload]:
    """Each payload given the images of its class (where the class names some) or of the plan.

    One pool per spec, built before the first request; each payload is a new object only when it
    carries media, so a text-only class keeps the shared fixed payload."""
    default = MediaSource(p.images, p.image_tensor, p.class_seed)
    by_class = {
        c.name: MediaSource(c.images or p.images, c.image_tensor or p.image_tensor, p.class_seed + i + 1)
        for i, c in enumerate(p.classes)
        if c.images is not None or c.image_tensor is not None
    }
    for payload in source:
        media = by_class.get((payload.tags or {}).get(CLASS_TAG, ""), default)
        parts, tensors = media.parts(), media.tensors()
        if parts is None and tensors is None:
            yield payload
            continue
        yield RequestPayload(
            prompt=payload.prompt,
            input_tokens=payload.input_tokens,
            max_output_tokens=payload.max_output_tokens,
            body=payload.body,
            extra=payload.extra,
            tags=payload.tags,
            parts=parts,
            tensors=tensors,
        )


def payload_source(plan: RunPlan) -> Iterator[RequestPayload]:
    """An endless payload iterator; the fixed payload is one shared object (no per-request allocation)."""
    p = plan.payload
    source: Iterator[RequestPayload]
    if p.shape_sweep is not None:
        source = shape_sweep_payloads(fixed_payload(plan), p.shape_sweep)
    elif p.workload is None:
        source = itertools.repeat(fixed_payload(plan))
    else:
        from pydantic import TypeAdapter

        from mcp_bench import workload as wl

        spec = TypeAdapter(wl.Workload).validate_python(p.workload)
        source = wl.payloads(spec)
    if p.classes:
        source = classed(source, p.classes, p.class_seed)
    if (
        p.images is not None
        or p.image_tensor is not None
        or any(c.images is not None or c.image_tensor is not None for c in p.classes)
    ):
        source = with_media(source, p)
    return source
