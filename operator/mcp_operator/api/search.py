"""MCPBenchmark's saturation search (spec.load.search) and what status shows of it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import ApiModel, cel, with_rules

MAX_SEARCH_PROBES = 32  # every probe is a status row, and status keeps at most 32


class BenchmarkSearch(ApiModel):
    """Find the highest load (rate, or concurrency) that still meets spec.slo by a bounded search
    from the one level in spec.load.rate or spec.load.concurrency: bracket by factor, then bisect.
    Runs in one shard only (SearchNeedsOneShard otherwise): each probe is chosen from what the
    last one measured, which shards running apart cannot share."""

    model_config = with_rules(cel("self.floor <= self.ceiling", "floor must not be above ceiling"))

    floor: float = Field(
        gt=0,
        le=1_000_000,
        description="Lowest load to try; missed there, the search ends (SloNeverMet).",
    )
    ceiling: float = Field(
        gt=0,
        le=1_000_000,
        description="Highest load to try; met there, the search ends (CeilingReached).",
    )
    factor: float = Field(default=2.0, gt=1, le=10, description="Bracket step: load times or over this.")
    tolerance: float = Field(
        default=0.05,
        ge=0.001,
        le=0.5,
        description="Converged once the lowest load missed is within this share above the highest met.",
    )
    max_probes: int = Field(
        default=8, ge=2, le=MAX_SEARCH_PROBES, description="Levels run at most (each one a status row)."
    )
    knee_efficiency: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="Knee: a higher load's throughput grew by less than this share of its load step...",
    )
    knee_latency_rise: float = Field(
        default=0.2, gt=0, le=100, description="...while mean latency rose by more than this share."
    )

    @model_validator(mode="after")
    def _ordered(self) -> BenchmarkSearch:
        if self.floor > self.ceiling:
            raise ValueError("floor must not be above ceiling")
        return self


SEARCH_RULES = (
    cel(
        "!has(self.search) || (has(self.rate) ? size(self.rate) == 1 : "
        "(has(self.concurrency) && size(self.concurrency) == 1))",
        "a search starts from one level: give exactly one rate or one concurrency",
    ),
    cel(
        "!has(self.search) || (has(self.rate) ? (self.rate[0] >= self.search.floor && "
        "self.rate[0] <= self.search.ceiling) : (!has(self.concurrency) || "
        "(double(self.concurrency[0]) >= self.search.floor && "
        "double(self.concurrency[0]) <= self.search.ceiling)))",
        "the search's first level must lie between search.floor and search.ceiling",
    ),
)


class SearchStatus(ApiModel):
    """What the saturation search found (figures as in status.results: per shard, the one shard)."""

    over: Literal["rate", "concurrency"] = Field(description="What was searched.")
    max_goodput_load: str = Field(
        description="Highest load that met every SLO (the max-goodput rate or concurrency), or n/a."
    )
    max_goodput_rps: str = Field(description="Goodput measured at that load (requests/s meeting the SLO).")
    lowest_failing_load: str = Field(description="Lowest load that missed the SLO, or n/a.")
    knee_load: str = Field(
        description="Where throughput stopped growing while latency climbed: the lowest load on the "
        "throughput plateau, or n/a."
    )
    knee_next_load: str = Field(
        default="n/a", description="The higher load that shows the knee (throughput flat, latency up)."
    )
    stop_reason: Literal["Converged", "BudgetExhausted", "SloNeverMet", "CeilingReached"] = Field(
        description="Why the search stopped."
    )
    message: str = Field(description="Where it stopped and why; the knee's note.", max_length=1024)
    probes: int = Field(ge=0, le=MAX_SEARCH_PROBES, description="Levels run (each a row in results).")
