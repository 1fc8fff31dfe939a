"""The exit code of ``kubectl mcp board``, in the table every ``kubectl mcp`` and ``mcp-check``
command shares (``mcp_checks.api.ExitCode``, docs/mcp-check.md "Exit codes"): a CI step reads
the board's code as it reads the gate's.

0 only for a verdict of the current spec that is Ready; 1 for a ``Fail`` of the current spec;
3 for what verifies nothing (``Inconclusive``, ``Error``, an evaluation or a run in progress, a
verdict of an older generation, the API server unreachable or refusing); 2 for a usage error or
an object that is not there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_checks.api import ExitCode, for_verdict

from ..api.benchmark import KIND as BENCHMARK_KIND
from ..conditions import condition
from .read import ReadError
from .status import benchmark as benchmark_status
from .status import readiness as readiness_status


def object_code(obj: Mapping[str, Any]) -> ExitCode:
    """The code of an object read (an MCPReadiness or an MCPBenchmark, as the API returns it)."""
    read = benchmark_status(obj) if obj.get("kind") == BENCHMARK_KIND else readiness_status(obj)
    status = read.status
    ready = condition(status.conditions, "Ready")
    observed = status.observed_generation
    if ready is not None and ready.observed_generation is not None:
        observed = ready.observed_generation  # the verdict's own generation
    if read.generation is not None and observed != read.generation:
        return ExitCode.NOT_VERIFIED  # the spec changed: the verdict shown is of an older one
    if ready is not None and ready.status == "True":
        return ExitCode.PASS
    if ready is None or ready.status != "False":
        return ExitCode.NOT_VERIFIED  # an evaluation or a run in progress, or none yet
    code = for_verdict(str(status.verdict or ""))
    return ExitCode.NOT_VERIFIED if code == ExitCode.PASS else code  # never 0 unless Ready


def read_error_code(error: ReadError) -> ExitCode:
    """2 when the cause is what was asked (not found, no usable kubeconfig), else 3: the API
    server unreachable or refusing (401, 403, 5xx) leaves the object unverified."""
    return ExitCode.USAGE if error.usage else ExitCode.NOT_VERIFIED
