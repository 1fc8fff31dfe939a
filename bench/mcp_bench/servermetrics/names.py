"""Metric names the benchmark reads from Triton and vLLM; absent ones are reported ``missing``.

Counters are named as their value sample appears in the exposition (Triton: no ``_total``; vLLM:
with ``_total``); histograms by their family name.
"""

# Triton's per-model counters, in the order Triton exposes them; the reference server serves
# these same names, so the two sides cannot drift apart.
TRITON_COUNTERS: tuple[str, ...] = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)
_COUNTERS_NOT_READ = ("nv_inference_compute_input_duration_us", "nv_inference_compute_output_duration_us")

# What the benchmark reads from Triton: the counters but compute input/output time, GPU utilization
# and GPU memory used.
TRITON_METRICS: tuple[str, ...] = (
    *(name for name in TRITON_COUNTERS if name not in _COUNTERS_NOT_READ),
    "nv_gpu_utilization",
    "nv_gpu_memory_used_bytes",
)

VLLM_METRICS: tuple[str, ...] = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:generation_tokens_total",
)

# The DCGM exporter's per-GPU gauges the benchmark reads (dcgm-exporter's default counters): SM
# utilisation (%), frame buffer used and free (MiB), power draw (W).
DCGM_METRICS: tuple[str, ...] = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
)
DCGM_PORT = 9400  # dcgm-exporter's default listening port

# Memory gauges the GPU-memory forensics read, with the factor to bytes: Triton's per-GPU gauge, the
# DCGM exporter's frame buffer (MiB), and any process collector's resident set.
MEMORY_GAUGES: dict[str, float] = {
    "nv_gpu_memory_used_bytes": 1.0,
    "DCGM_FI_DEV_FB_USED": float(2**20),
    "process_resident_memory_bytes": 1.0,
    # the GPU model server's PyTorch caching allocator: live tensors, and what it holds from the driver
    "mcp_gpu_model_server_torch_allocated_bytes": 1.0,
    "mcp_gpu_model_server_torch_reserved_bytes": 1.0,
}
# Gauges of live allocations (tensors in use): where one returned to its baseline, memory the same
# server kept is its allocator's cache, not a leak.
LIVE_ALLOCATION_GAUGES: frozenset[str] = frozenset({"mcp_gpu_model_server_torch_allocated_bytes"})
# The gauges whose sum is the memory a MEMORY_GAUGES family is part of (its peak as a percentage).
MEMORY_TOTALS: dict[str, tuple[str, ...]] = {
    "nv_gpu_memory_used_bytes": ("nv_gpu_memory_total_bytes",),
    "DCGM_FI_DEV_FB_USED": ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"),
}
# GPU memory gauges that include what a caching allocator holds (not the host's resident set).
CACHED_BY_ALLOCATOR: frozenset[str] = frozenset(
    {"nv_gpu_memory_used_bytes", "DCGM_FI_DEV_FB_USED", "mcp_gpu_model_server_torch_reserved_bytes"}
)
