"""``mcp-bench search``: the run flags plus the search's bounds, and how the outcome is printed.

The command runs the same plan as ``mcp-bench run`` with ``search`` added, so a plan file with
``search:`` and the flags here give the same run. Exit 0 when some load met the SLO, 1 when none
did (``slo_never_met``, or a budget spent before any load met it)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from mcp_bench.plan import RunPlan
from mcp_bench.saturation import SearchOutcome
from mcp_bench.search.rows import figure, search_line

_FLAGS = {
    "floor": "floor",
    "ceiling": "ceiling",
    "factor": "factor",
    "tolerance": "tolerance",
    "max_probes": "max_probes",
}


def add_search_flags(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--floor", type=float, help="lowest load to try (default 1, or the first probe when lower)")
    a("--ceiling", type=float, help="highest load to try (required unless the plan has a search)")
    a("--factor", type=float, help="bracket step: the load is multiplied or divided by it (default 2)")
    a("--tolerance", type=float, help="converged once (missed - met) <= tolerance x met (default 0.05)")
    a("--max-probes", type=int, help="levels run at most (default 8, at most 32)")


def with_search(plan: RunPlan, args: argparse.Namespace) -> RunPlan:
    """The plan with its search from the flags (over the plan's own search, if it has one)."""
    given: dict[str, Any] = {
        key: getattr(args, flag) for flag, key in _FLAGS.items() if getattr(args, flag) is not None
    }
    current = plan.search.model_dump() if plan.search is not None else {}
    search = {**current, **given}
    if "ceiling" not in search:
        raise ValueError("mcp-bench search needs --ceiling (or a plan with search.ceiling)")
    if "floor" not in search:
        lv = plan.levels
        first = (lv.rate or lv.concurrency or [1])[0]
        search["floor"] = min(1.0, float(first))
    return RunPlan.from_dict({**plan.model_dump(), "search": search}, source="mcp-bench search")


def print_search(outcome: SearchOutcome, out: Console) -> None:
    """The probes in the order they ran, then the answer, the knee and why the search stopped."""
    unit = " r/s" if outcome.over == "rate" else ""
    out.print(f"saturation search over {outcome.over}: {len(outcome.probes)} probe(s)", highlight=False)
    for p in outcome.probes:
        out.print(
            f"  {p.step:>12} {figure(p.load, unit):>12}  {'met' if p.passed else 'missed':6} "
            f"throughput {figure(p.throughput_rps)} rps, goodput {figure(p.goodput_rps)} rps, "
            f"latency mean {figure(p.latency_mean_ms, ' ms')}, p99 {figure(p.latency_p99_ms, ' ms')}",
            highlight=False,
        )
    out.print(search_line(outcome), highlight=False)
