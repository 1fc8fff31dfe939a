"""The probe requests: fixed, seeded and asking for deterministic decoding, so that a server
that answers them differently under load than at rest has changed its output, not its luck.

OpenAI backends get seeded prompts with ``temperature`` 0, the plan's ``seed`` and (when asked)
``logprobs``; V2 backends get seeded input tensors of the shapes the load's client uses. Every
probe asks the protocol client to keep its answer (``RequestPayload.capture``).
"""

from __future__ import annotations

import random
from typing import Any

from mcp_bench.plan import Consistency, RunPlan
from mcp_bench.records import RequestPayload

_WORDS = [
    "river",
    "stone",
    "lantern",
    "orbit",
    "maple",
    "signal",
    "quiet",
    "copper",
    "window",
    "harbor",
    "meadow",
    "violet",
    "engine",
    "thunder",
    "paper",
    "glacier",
    "falcon",
    "candle",
    "summit",
    "velvet",
    "anchor",
    "prism",
    "echo",
    "cedar",
    "ember",
]


def probe_prompts(cfg: Consistency) -> list[str]:
    """``cfg.probes`` distinct prompts of 8 to 15 words, the same for the same seed."""
    prompts = []
    for i in range(cfg.probes):
        rng = random.Random(f"mcp-bench-consistency-{cfg.seed}-{i}")
        prompts.append(" ".join(rng.choices(_WORDS, k=8 + rng.randrange(8))))
    return prompts


def openai_probes(plan: RunPlan, cfg: Consistency) -> list[RequestPayload]:
    extra: dict[str, Any] = {"temperature": 0, "seed": cfg.seed}
    if cfg.logprobs:
        # chat asks with a flag, completions with a number of alternatives (1: the most servers honour)
        extra["logprobs"] = True if plan.backend == "openai-chat" else 1
    return [
        RequestPayload(prompt=p, max_output_tokens=cfg.max_tokens, extra=dict(extra), capture=True)
        for p in probe_prompts(cfg)
    ]


def v2_probes(client: Any, cfg: Consistency) -> list[RequestPayload]:
    """One seeded tensor set per probe, in the input shapes the opened V2 client uses."""
    from mcp_bench.multimodal import Tensor
    from mcp_bench.protocols.triton import make_array

    probes = []
    for i in range(cfg.probes):
        rng = random.Random(f"mcp-bench-consistency-{cfg.seed}-{i}")
        tensors = [
            Tensor(spec.name, spec.datatype, make_array(spec, rng), f"consistency-{cfg.seed}-{i}-{spec.name}")
            for spec in client.input_specs
        ]
        probes.append(RequestPayload(tensors=tensors, capture=True))
    return probes


def build_probes(plan: RunPlan, client: Any, cfg: Consistency) -> list[RequestPayload]:
    if plan.backend.startswith("triton"):
        return v2_probes(client, cfg)
    return openai_probes(plan, cfg)
