"""spec.consistency: probe requests answered at rest and during every level, whose answers under
load are compared with those at rest (mcp_bench.consistency); a level whose outputs drift past a
threshold is a finding, whatever its latency."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import ApiModel


class ConsistencySpec(ApiModel):
    probes: int = Field(default=4, ge=1, le=32, description="Distinct probe requests, all sent each round.")
    interval_seconds: float = Field(
        default=1.0, gt=0, le=600, description="Seconds between probe rounds during a level."
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

    def plan(self) -> dict[str, object]:
        """The plan's consistency section (mcp_bench.plan.Consistency)."""
        return {
            "probes": self.probes,
            "interval_s": self.interval_seconds,
            "max_rounds": self.max_rounds,
            "rest_repeats": self.rest_repeats,
            "max_tokens": self.max_tokens,
            "logprobs": self.logprobs,
            "seed": self.seed,
            "l2": self.l2,
            "threshold_l2": self.threshold_l2,
            "threshold_mismatch": self.threshold_mismatch,
        }
