"""mcp_checks' public face: what users outside the package (the operator) import.

The check suite and its specs, the health probe, config consistency, the sentinel, verdicts,
JUnit, and the typed reader of MCPReadiness status (redaction is ``mcp_common.redact``). Import
from here, not from the modules behind it; the modules may move, this list stays. (Tests may
import the modules themselves.)
"""

from __future__ import annotations

from mcp_checks.cli import kubectl_main
from mcp_checks.config import (
    ConfigConsistencySpec,
    ConfigContent,
    config_hash,
    run_config_consistency,
    short,
    wait_served,
)
from mcp_checks.dialhooks import DialHooks
from mcp_checks.exitcodes import ExitCode, for_verdict
from mcp_checks.exitcodes import table as exit_code_table
from mcp_checks.health import HealthProbeSpec, required_samples, run_health_probe, run_health_probe_blocking
from mcp_checks.junit import write_junit
from mcp_checks.sentinel import SentinelRecord, run_sentinel
from mcp_checks.status import ReadinessObject
from mcp_checks.suite import CheckContext, HealthProbeRunner, SpecError, plan_checks, run_checks
from mcp_checks.verdict import SEVERITY, CheckOutcome, Finding, RunVerdict, Verdict, decide, utc_now
from mcp_checks.xds.memory import XdsMemory

__all__ = [
    "SEVERITY",
    "CheckContext",
    "CheckOutcome",
    "ConfigConsistencySpec",
    "ConfigContent",
    "DialHooks",
    "ExitCode",
    "Finding",
    "HealthProbeRunner",
    "HealthProbeSpec",
    "ReadinessObject",
    "RunVerdict",
    "SentinelRecord",
    "SpecError",
    "Verdict",
    "XdsMemory",
    "config_hash",
    "decide",
    "exit_code_table",
    "for_verdict",
    "kubectl_main",
    "plan_checks",
    "required_samples",
    "run_checks",
    "run_config_consistency",
    "run_health_probe",
    "run_health_probe_blocking",
    "run_sentinel",
    "short",
    "utc_now",
    "wait_served",
    "write_junit",
]
