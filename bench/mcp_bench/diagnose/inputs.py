"""What the detectors read: the run's result document and, when given, what else there is."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_bench.diagnose.sources.ncu import NcuReport
from mcp_bench.diagnose.sources.trace import Trace
from mcp_bench.results.document import ResultDocument


@dataclass(frozen=True)
class DiagnoseInputs:
    """``document``: the benchmark's result (client figures, server-metric deltas per level,
    Triton statistics, GPU telemetry, per-class and per-shape breakdowns). ``compare``: a second
    run of the same workload another way (the other protocol for trap 11, the other precision for
    trap 4). ``trace``: a profiler trace (Chrome trace JSON: PyTorch profiler, Nsight Systems
    converted). ``ncu``/``ncu_baseline``: Nsight Compute CSV exports, the run and a baseline."""

    document: ResultDocument | None = None
    compare: ResultDocument | None = None
    trace: Trace | None = None
    ncu: NcuReport | None = None
    ncu_baseline: NcuReport | None = None
