"""The plan's models, the face the operator's API models derive from: pure pydantic, nothing
that runs. Each field's alias and default is declared once, in the module behind this face; the
CRD models subclass these and add only what the API server enforces."""

from __future__ import annotations

from mcp_bench.multimodal import ImageParts, ImageTensor
from mcp_bench.plan import (
    Arrival,
    Backend,
    ClassBackend,
    Connections,
    Consistency,
    Levels,
    Observe,
    Overload,
    RequestClass,
    Retry,
    RunPlan,
    ShapeSweep,
    Stage,
)
from mcp_bench.saturation import MAX_PROBES, SearchSpec
from mcp_bench.workload import MAX_HISTOGRAM_BINS, DatasetWorkload, Distribution

__all__ = [
    "MAX_HISTOGRAM_BINS",
    "MAX_PROBES",
    "Arrival",
    "Backend",
    "ClassBackend",
    "Connections",
    "Consistency",
    "DatasetWorkload",
    "Distribution",
    "ImageParts",
    "ImageTensor",
    "Levels",
    "Observe",
    "Overload",
    "RequestClass",
    "Retry",
    "RunPlan",
    "SearchSpec",
    "ShapeSweep",
    "Stage",
]
