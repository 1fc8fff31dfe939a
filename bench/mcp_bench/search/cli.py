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


def _figure(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{unit}"


def print_search(outcome: SearchOutcome, out: Console) -> None:
    """The probes in the order they ran, then the answer, the knee and why the search stopped."""
    unit = " r/s" if outcome.over == "rate" else ""
    out.print(f"saturation search over {outcome.over}: {len(outcome.probes)} probe(s)", highlight=False)
    for p in outcome.probes:
        out.print(
            f"  {p.step:>12} {_figure(p.load, unit):>12}  {'met' if p.passed else 'missed':6} "
            f"throughput {_figure(p.throughput_rps)} rps, goodput {_figure(p.goodput_rps)} rps, "
            f"latency mean {_figure(p.latency_mean_ms, ' ms')}, p99 {_figure(p.latency_p99_ms, ' ms')}",
            highlight=False,
        )
    out.print(search_line(outcome), highlight=False)


def search_line(outcome: SearchOutcome) -> str:
    """One line: the answer, the knee and the stop reason (the quiet form, and the operator's)."""
    unit = " r/s" if outcome.over == "rate" else ""
    answer = (
        f"max goodput at {_figure(outcome.max_goodput_load, unit)} "
        f"({_figure(outcome.max_goodput_rps)} good rps)"
        if outcome.found
        else "no load met the SLO"
    )
    knee = outcome.knee
    knee_text = (
        f"knee at {_figure(knee.load, unit)} (shown at {_figure(knee.next_load, unit)}: throughput "
        f"{_figure(knee.throughput_rps)} -> {_figure(knee.next_throughput_rps)} rps, latency "
        f"{_figure(knee.latency_mean_ms)} -> {_figure(knee.next_latency_mean_ms)} ms)"
        if knee is not None
        else outcome.knee_note
    )
    return f"{answer}; {knee_text}; stopped: {outcome.stop_reason} ({outcome.message})"
