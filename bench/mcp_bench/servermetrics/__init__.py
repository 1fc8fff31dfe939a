"""Server-side metrics: snapshots of Triton/vLLM /metrics, Triton's statistics extension or PromQL
answers, taken before and after each level, and their deltas (counters, gauges, histograms)."""

from mcp_bench.servermetrics.delta import delta, histogram_quantile
from mcp_bench.servermetrics.names import TRITON_METRICS, VLLM_METRICS
from mcp_bench.servermetrics.probes import (
    PrometheusEndpointProbe,
    PrometheusQueryProbe,
    PromQuery,
    ServerMetricsProbe,
    TritonStatsProbe,
    deltas,
    snapshot_all,
    triton_probe,
    vllm_probe,
)
from mcp_bench.servermetrics.snapshot import Distribution, Family, Snapshot, parse_prometheus_text
from mcp_bench.servermetrics.triton_stats import parse_triton_stats, stage_means

__all__ = [
    "TRITON_METRICS",
    "VLLM_METRICS",
    "Distribution",
    "Family",
    "PromQuery",
    "PrometheusEndpointProbe",
    "PrometheusQueryProbe",
    "ServerMetricsProbe",
    "Snapshot",
    "TritonStatsProbe",
    "delta",
    "deltas",
    "histogram_quantile",
    "parse_prometheus_text",
    "parse_triton_stats",
    "snapshot_all",
    "stage_means",
    "triton_probe",
    "vllm_probe",
]
