"""MCPBenchmark's saturation search (spec.load.search) and what status shows of it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcp_bench.models import MAX_PROBES as MAX_SEARCH_PROBES
from mcp_bench.models import SearchSpec

from .common import ApiModel, cel
from .engine import engine_rules


class BenchmarkSearch(SearchSpec, ApiModel):
    """Find the highest load (rate, or concurrency) that still meets spec.slo by a bounded search
    from the one level in spec.load.rate or spec.load.concurrency: bracket by factor, then bisect.
    Runs in one shard only (SearchNeedsOneShard otherwise): each probe is chosen from what the
    last one measured, which shards running apart cannot share. Fields and defaults:
    ``mcp_bench.saturation.SearchSpec``."""

    model_config = engine_rules(cel("self.floor <= self.ceiling", "floor must not be above ceiling"))


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
