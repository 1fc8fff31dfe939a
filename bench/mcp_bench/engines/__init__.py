"""Engines turn a run plan into a result document; ``run_plan`` picks the one the plan names."""

from mcp_bench.engines.base import (
    Engine,
    RunObserver,
    UnknownEngineError,
    get_engine,
    plan_feature_problem,
    register_engine,
)
from mcp_bench.engines.external import EngineUnavailableError, ExternalEngineError
from mcp_bench.engines.run import run_plan, run_plan_sync
from mcp_bench.protocols import ProtocolFactory, UnknownBackendError, protocol_factory, register_protocol

__all__ = [
    "Engine",
    "EngineUnavailableError",
    "ExternalEngineError",
    "ProtocolFactory",
    "RunObserver",
    "UnknownBackendError",
    "UnknownEngineError",
    "get_engine",
    "plan_feature_problem",
    "protocol_factory",
    "register_engine",
    "register_protocol",
    "run_plan",
    "run_plan_sync",
]
