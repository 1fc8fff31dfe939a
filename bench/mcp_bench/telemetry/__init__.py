"""GPU telemetry: an NVML sampler, bounded time series, per-level summaries and GPU fairness.

Standard library only at import time (``pynvml`` is loaded when sampling starts).
"""

from mcp_bench.fairness import FairnessReport, fairness
from mcp_bench.telemetry.fairness import gpu_fairness, utilisation_shares
from mcp_bench.telemetry.nvml import (
    DEFAULT_INTERVAL_S,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    GpuSampler,
    TelemetryConfigError,
    validate_interval,
)
from mcp_bench.telemetry.series import FIELDS, GpuInfo, SampleWindow, TelemetrySeries
from mcp_bench.telemetry.stats import field_summary, jitter_stats, plot_points, summarise, summarise_window

__all__ = [
    "DEFAULT_INTERVAL_S",
    "FIELDS",
    "MAX_INTERVAL_S",
    "MIN_INTERVAL_S",
    "FairnessReport",
    "GpuInfo",
    "GpuSampler",
    "SampleWindow",
    "TelemetryConfigError",
    "TelemetrySeries",
    "fairness",
    "field_summary",
    "gpu_fairness",
    "jitter_stats",
    "plot_points",
    "summarise",
    "summarise_window",
    "utilisation_shares",
    "validate_interval",
]
