"""Diagnosis of the twelve hidden latency traps, each a detector that reads what a run collected
and answers one :class:`Finding` (``Found``, ``NotFound`` or ``NoData`` with what it would need),
plus the bottleneck-layer screening.

    from mcp_bench.diagnose import DiagnoseInputs, diagnose
    findings = diagnose(DiagnoseInputs(document=doc, trace=load_trace("step.json")))

``mcp-bench diagnose result.json [--trace FILE] [--ncu FILE] [--json]`` is the same from the
command line; the operator runs it on every merged MCPBenchmark (``status.diagnostics``).
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp_bench.diagnose.catalog import all_detectors, known_thresholds, run_detectors
from mcp_bench.diagnose.finding import FOUND, NO_DATA, NOT_FOUND, Finding, State
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector
from mcp_bench.diagnose.sources.ncu import NcuFormatError, NcuReport, load_ncu, parse_ncu_csv
from mcp_bench.diagnose.sources.trace import Trace, TraceFormatError, load_trace, parse_trace
from mcp_bench.diagnose.thresholds import ThresholdError, parse_overrides


def diagnose(inputs: DiagnoseInputs, thresholds: Iterable[str] = ()) -> list[Finding]:
    """Every detector's finding, the screening first; ``thresholds`` as ``TRAP.NAME=VALUE``."""
    return run_detectors(inputs, parse_overrides(thresholds, known_thresholds()))


__all__ = [
    "FOUND",
    "NOT_FOUND",
    "NO_DATA",
    "Detector",
    "DiagnoseInputs",
    "Finding",
    "NcuFormatError",
    "NcuReport",
    "State",
    "ThresholdError",
    "Trace",
    "TraceFormatError",
    "all_detectors",
    "diagnose",
    "load_ncu",
    "load_trace",
    "parse_ncu_csv",
    "parse_trace",
]
