"""spec.load.search in the shard plan, the one-shard rule, and status.search from the result.

A search runs in one shard: each probe is chosen from what the previous one measured, and shards
running apart would choose apart (their levels could not be merged). Coordinating shards through
the operator would make every probe a barrier round-trip; refusing is the honest simple option."""

from __future__ import annotations

from typing import Any

from mcp_bench.api import SearchOutcome, search_line

from ..api.benchmark import MCPBenchmarkSpec
from ..api.search import SearchStatus
from ..bounded import TIERS, Bounds, clip
from ..targets import SpecProblem

STOP_REASONS = {
    "converged": "Converged",
    "budget_exhausted": "BudgetExhausted",
    "slo_never_met": "SloNeverMet",
    "ceiling_reached": "CeilingReached",
}


def search_plan(spec: MCPBenchmarkSpec) -> dict[str, Any] | None:
    """The plan's ``search`` for spec.load.search (the same fields in the engine's spelling)."""
    search = spec.load.search
    if search is None:
        return None
    return search.model_dump(by_alias=False)


def search_problem(spec: MCPBenchmarkSpec) -> SpecProblem | None:
    if spec.load.search is not None and spec.shards > 1:
        return SpecProblem(
            "SearchNeedsOneShard",
            f"spec.load.search runs in one shard (spec.shards is {spec.shards}): each probe is chosen "
            "from what the last one measured, which shards running apart cannot share",
        )
    return None


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def search_status(outcome: SearchOutcome, bounds: Bounds = TIERS[0]) -> SearchStatus:
    knee = outcome.knee
    return SearchStatus(
        over=outcome.over,
        max_goodput_load=_figure(outcome.max_goodput_load),
        max_goodput_rps=_figure(outcome.max_goodput_rps),
        lowest_failing_load=_figure(outcome.lowest_failing_load),
        knee_load=_figure(None if knee is None else knee.load),
        knee_next_load=_figure(None if knee is None else knee.next_load),
        stop_reason=STOP_REASONS[outcome.stop_reason],  # type: ignore[arg-type]
        message=clip(search_line(outcome), min(1024, bounds.text)),
        probes=len(outcome.probes),
    )


def search_message(outcome: SearchOutcome) -> str:
    """The Ready message of a search: its answer and where it stopped, not one probe's miss."""
    return f"saturation search: {search_line(outcome)}"
