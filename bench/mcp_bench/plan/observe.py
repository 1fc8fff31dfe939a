"""What a run reads besides its own figures: the server's side around each level, and the
consistency probes whose answers under load are compared with those at rest."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcp_bench.plan.base import Strict
from mcp_bench.specmodel import SpecModel


class Observe(Strict):
    """The server's side, read before and after each level (and sampled during it): the same
    grammar as ``mcp-bench run --server-metrics`` and ``--triton-stats``, so a plan (or an
    MCPBenchmark) can ask for what the diagnosis needs."""

    server_metrics: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="'triton', 'vllm' (the target's /metrics), 'triton=URL', 'vllm=URL' or a Prometheus URL",
    )
    triton_stats: list[str] = Field(
        default_factory=list, max_length=8, description="MODEL or MODEL=URL: Triton's statistics extension"
    )
    timeline_interval_s: float | None = Field(
        default=1.0,
        ge=0.05,
        le=60,
        description="also sample the servers' queue, cache and utilisation gauges this often during each "
        "level (None: only before and after)",
    )
    settle_s: float = Field(
        default=0,  # as MCPBenchmark's CRD shows it; validated to 0.0
        validate_default=True,
        ge=0,
        le=600,
        description="after each level, this long with no load before the next, and memory read again at its "
        "end: the GPU-memory forensics tell memory a level borrowed from memory it kept (0: no wait)",
    )

    prometheus: str | None = Field(
        default=None, max_length=2048, description="Prometheus server the promql queries are read through"
    )
    promql: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="NAME=EXPR (a gauge) or NAME:counter=EXPR, read around each level; needs prometheus",
    )
    gpu_samplers: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="node-level NVML samplers' URLs (mcp-bench gpu-sampler): the serving GPUs, per level",
    )

    @property
    def empty(self) -> bool:
        return not (self.server_metrics or self.triton_stats or self.promql or self.gpu_samplers)


class Consistency(SpecModel):
    """Output consistency under load (:mod:`mcp_bench.consistency`): ``probes`` fixed requests
    (seeded prompts or V2 tensors, deterministic decoding: temperature 0 and ``seed``) answered at
    rest before the first level, then again every ``interval_s`` during each level; each answer
    is compared with the probe's at-rest answer. A level whose answers drift past a threshold is
    a finding, whatever its latency. MCPBenchmark's spec.consistency subclasses it (its field
    descriptions are ``kubectl explain``'s; ``interval_s`` is ``intervalSeconds`` there)."""

    probes: int = Field(default=4, ge=1, le=32, description="Distinct probe requests, all sent each round.")
    interval_s: float = Field(
        default=1.0,
        gt=0,
        le=600,
        alias="intervalSeconds",
        description="Seconds between probe rounds during a level.",
    )
    max_rounds: int = Field(default=32, ge=1, le=1000, description="Probe rounds per level at most.")
    rest_repeats: int = Field(
        default=2,
        ge=1,
        le=10,
        description="Rounds at rest before the first level; their answers must agree, or no level is judged.",
    )
    max_tokens: int = Field(
        default=16, ge=1, le=4096, description="OpenAI backends: tokens each probe asks for."
    )
    logprobs: bool = Field(
        default=True,
        description="OpenAI backends: ask for logprobs and compare them where the server returns them.",
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**31 - 1,
        description="Seeds the probes' prompts or tensors and the sampling seed sent.",
    )
    l2: Literal["relative", "absolute"] = Field(
        default="relative", description="L2 distance of numeric outputs: over the at-rest norm, or as is."
    )
    threshold_l2: float = Field(
        default=1e-3, ge=0, le=1e12, description="An answer farther than this is drift."
    )
    threshold_mismatch: float = Field(
        default=0.0, ge=0, le=1, description="A level's share of differing tokens above this is drift."
    )
