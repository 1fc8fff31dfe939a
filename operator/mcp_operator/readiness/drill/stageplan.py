"""A drill stage's load as the engine's plan (``RunPlan``), the one shape both loaders start
from: the operator's own process runs it as it is (``load.LoadRunner``), shard Jobs run it as an
MCPBenchmark whose shards share its levels (``shardload``).

The stage is consecutive windows of the same load, one level each: the windows say when within
the stage P99 jumps, and their histograms add up to the stage's exact percentiles. An open-loop
stage's arrivals are Poisson, each window holding its rate x time within one (so the stage
offers its rate, not a seed's stray), and an arrival the client cannot send in time is dropped
(counted apart: no evidence about the service either way).
"""

from __future__ import annotations

import math
from typing import Any

from mcp_bench.api import RunPlan

from ...api.drill import StageLoad
from ...benchmark.public import plan_class
from ...targets import join_url

ARRIVAL = "poisson"
OVERLOAD = "drop"
REQUEST_TIMEOUT_S = 5.0
LABELS = {"component": "mcp-readiness-drill"}


def requested(load: StageLoad) -> str:
    """The stage's load as status and the board show it: its rate, or its concurrency."""
    return f"{load.rate:g} req/s" if load.rate is not None else f"concurrency {load.concurrency}"


def window_count(load: StageLoad, most: int | None = None) -> tuple[int, float]:
    """How many windows the stage has and how long each is: whole windows that fill it; at most
    ``most`` (longer ones then), where each window is a level of a benchmark, which has a limit."""
    windows = max(1, math.ceil(load.duration_seconds / load.window_seconds))
    if most is not None:
        windows = min(windows, most)
    return windows, load.duration_seconds / windows


def stage_plan(load: StageLoad, base_url: str, most: int | None = None) -> RunPlan:
    """The engine's plan of the stage: one level per window (at most ``most``), back to back; a
    mix sends each class on its own protocol and path against the service."""
    windows, window_s = window_count(load, most)
    levels: dict[str, Any] = (
        {"rate": [load.rate] * windows, "arrival": ARRIVAL, "overload": OVERLOAD}
        if load.rate is not None
        else {"concurrency": [load.concurrency] * windows}
    )
    plan: dict[str, Any] = {
        "url": join_url(base_url, load.path),
        "backend": "http",
        "levels": levels,
        "stage": {"duration_s": window_s},
        "request_timeout_s": REQUEST_TIMEOUT_S,
        "labels": LABELS,
    }
    if load.classes:
        plan.update(
            url=base_url,
            backend="mix",
            payload={"classes": [plan_class(c.as_request_class()) for c in load.classes]},
        )
    if load.retry is not None:
        plan["retry"] = load.retry.model_dump()
    return RunPlan.from_dict(plan, source="the drill stage's load")
