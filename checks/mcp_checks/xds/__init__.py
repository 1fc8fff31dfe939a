"""xDS sync assertion: every proxy has acknowledged the configuration its control plane last
sent, read from CSDS, istiod's ``/debug/syncz`` or an Envoy admin endpoint."""

from mcp_checks.xds.csds import parse_client_status
from mcp_checks.xds.envoy_admin import parse_envoy_admin
from mcp_checks.xds.evaluate import judge
from mcp_checks.xds.memory import XdsMemory
from mcp_checks.xds.model import (
    XDS_TYPES,
    ProxyReport,
    SourceAnswer,
    SyncState,
    TypeStatus,
    XdsSource,
    XdsSyncSpec,
)
from mcp_checks.xds.runner import Convergence, measure_convergence, run_xds_sync
from mcp_checks.xds.syncz import parse_syncz

__all__ = [
    "XDS_TYPES",
    "Convergence",
    "ProxyReport",
    "SourceAnswer",
    "SyncState",
    "TypeStatus",
    "XdsMemory",
    "XdsSource",
    "XdsSyncSpec",
    "judge",
    "measure_convergence",
    "parse_client_status",
    "parse_envoy_admin",
    "parse_syncz",
    "run_xds_sync",
]
