"""The run plan: everything one benchmark run needs, validated before any traffic is sent.

A plan is the single input of every engine (built-in, Locust, k6) and is copied verbatim into the
result document, so a result always says exactly what was asked for. Wrong fields fail fast with
the pydantic field path (``levels.rate.0: Input should be greater than 0``).

``run`` holds the plan and its cross-section checks, ``levels`` how the load runs, ``payload`` what
each request carries, ``observe`` what is read besides the figures; the names below are the ones
the rest of ``mcp_bench`` (and the operator's API models) import from here.
"""

from mcp_bench.plan.base import PlanError, format_validation_error
from mcp_bench.plan.levels import (
    Arrival,
    Backend,
    CircuitBreaker,
    ClassBackend,
    ClientBound,
    Connections,
    Levels,
    Overload,
    Retry,
    Slo,
    StabilityRule,
    Stage,
)
from mcp_bench.plan.observe import Consistency, Observe
from mcp_bench.plan.payload import Payload, RequestClass, ShapeSweep
from mcp_bench.plan.run import RunPlan, choose_workers

__all__ = [
    "Arrival",
    "Backend",
    "CircuitBreaker",
    "ClassBackend",
    "ClientBound",
    "Connections",
    "Consistency",
    "Levels",
    "Observe",
    "Overload",
    "Payload",
    "PlanError",
    "RequestClass",
    "Retry",
    "RunPlan",
    "ShapeSweep",
    "Slo",
    "StabilityRule",
    "Stage",
    "choose_workers",
    "format_validation_error",
]
