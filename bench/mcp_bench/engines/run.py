"""Running a plan: ``run_plan`` picks the engine the plan names, or the worker pool for
``workers > 1``. Above :mod:`mcp_bench.engines.base` and :mod:`mcp_bench.engines.workers`, which
import the engine interface, so that the interface never imports the pool back."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_bench.engines.base import RunObserver, get_engine, run_sync
from mcp_bench.engines.workers import WorkerPool
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import ResultDocument


async def run_plan(plan: RunPlan, observers: Sequence[RunObserver] = ()) -> ResultDocument:
    """Run ``plan`` with the engine it names (``builtin`` by default); ``workers > 1`` runs the
    built-in engine in that many processes (:mod:`mcp_bench.engines.workers`)."""
    if plan.workers > 1:
        return await WorkerPool().run(plan, observers)
    return await get_engine(plan.engine).run(plan, observers)


def run_plan_sync(
    plan: RunPlan, observers: Sequence[RunObserver] = (), *, use_uvloop: bool = True
) -> ResultDocument:
    """Blocking form for CLIs and Job pods; uses uvloop when it is installed and asked for."""
    return run_sync(run_plan(plan, observers), use_uvloop=use_uvloop)
