"""API models of the custom resources; the single source of truth for the CRDs.

This package must not import kopf: the CRD generator and the CLI use it without an operator.
"""

from .benchmark import MCPBenchmarkSpec, MCPBenchmarkStatus
from .common import API_VERSION, GROUP, VERSION, Condition, Verdict
from .readiness import MCPReadinessSpec, MCPReadinessStatus

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Condition",
    "MCPBenchmarkSpec",
    "MCPBenchmarkStatus",
    "MCPReadinessSpec",
    "MCPReadinessStatus",
    "Verdict",
]
