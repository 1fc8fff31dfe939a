"""Prometheus /metrics of the reference server, under Triton's and vLLM's metric names.

Triton families (``nv_inference_*``) come from :class:`ServerStats` through a collector and
are rendered the way Triton renders them: counters without a ``_total`` suffix. The GPU
families (``nv_gpu_utilization``, ``nv_gpu_memory_used_bytes``, ``nv_gpu_memory_total_bytes``)
are SIMULATED constants from the config, labelled ``gpu_uuid="GPU-simulated-refserver-0"``;
no GPU is read. vLLM families (``vllm:*``) are ordinary prometheus_client metrics; as in
vLLM, counters carry ``_total``. ``vllm:kv_cache_usage_perc`` is simulated as the fraction of
service slots in use (0 when capacity is unlimited); ``vllm:num_preemptions_total`` stays 0
because the model never preempts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mcp_bench.servermetrics.names import TRITON_COUNTERS
from mcp_refserver.config import RefServerConfig
from mcp_refserver.model import ServerModel
from mcp_refserver.stats import ServerStats


class Load(Protocol):
    """What the queue gauges read: a gate, or the whole model (all instances and the KV cache)."""

    @property
    def running(self) -> int: ...

    @property
    def waiting(self) -> int: ...


SIMULATED_GPU_UUID = "GPU-simulated-refserver-0"

# vLLM's own bucket boundaries, so histogram_quantile() behaves as it would against vLLM.
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)


class _TritonCollector(Collector):
    def __init__(self, config: RefServerConfig, stats: ServerStats, model: ServerModel | None) -> None:
        self._config = config
        self._stats = stats
        self._model = model

    def collect(self) -> Iterable[Metric]:
        s, c = self._stats, self._config
        values = {
            "nv_inference_request_success": (s.success.count, "Number of successful inference requests"),
            "nv_inference_request_failure": (s.fail.count, "Number of failed inference requests"),
            "nv_inference_count": (s.inference_count, "Number of inferences performed"),
            "nv_inference_exec_count": (s.execution_count, "Number of model executions performed"),
            "nv_inference_request_duration_us": (
                (s.success.ns + s.fail.ns) // 1000,
                "Cumulative inference request duration in microseconds",
            ),
            "nv_inference_queue_duration_us": (
                s.queue.ns // 1000,
                "Cumulative inference queuing duration in us",
            ),
            "nv_inference_compute_input_duration_us": (
                s.compute_input.ns // 1000,
                "Cumulative compute input duration in us (zero unless a codec knob is set)",
            ),
            "nv_inference_compute_infer_duration_us": (
                s.compute_infer.ns // 1000,
                "Cumulative compute inference duration in microseconds",
            ),
            "nv_inference_compute_output_duration_us": (
                s.compute_output.ns // 1000,
                "Cumulative compute output duration in us (zero unless a codec knob is set)",
            ),
        }
        labels = {"model": c.model, "version": c.model_version}
        for name in TRITON_COUNTERS:
            value, doc = values[name]
            m = Metric(name, doc, "counter")
            m.add_sample(name, labels, float(value))
            yield m
        model = self._model
        gauges: tuple[tuple[str, str, float], ...] = (
            ("nv_gpu_utilization", "SIMULATED constant GPU utilization (0.0 - 1.0)", c.gpu_utilization),
            (
                "nv_gpu_memory_used_bytes",
                "SIMULATED GPU used memory in bytes (see mcp_refserver.memory)",
                float(c.gpu_memory_used_bytes if model is None else model.memory.used_bytes(model.running)),
            ),
            (
                "nv_gpu_memory_total_bytes",
                "SIMULATED constant GPU total memory in bytes",
                c.gpu_memory_total_bytes,
            ),
        )
        for name, doc, gauge_value in gauges:
            g = GaugeMetricFamily(name, doc, labels=["gpu_uuid"])
            if name == "nv_gpu_utilization" and model is not None and len(model.instances) > 1:
                now = time.perf_counter_ns()
                for inst in model.instances:  # trap 10: each instance's busy share since the last scrape
                    g.add_metric(
                        [f"{SIMULATED_GPU_UUID[:-1]}{inst.index}"], inst.utilisation_since_last_read(now)
                    )
            else:
                g.add_metric([SIMULATED_GPU_UUID], gauge_value)
            yield g


class _TrapCollector(Collector):
    """Families the trap knobs add (only when one is set, so the default exposition is unchanged)."""

    def __init__(self, model: ServerModel) -> None:
        self._model = model

    def collect(self) -> Iterable[Metric]:
        m, c = self._model, self._model.config
        if len(m.instances) > 1:
            busy = CounterMetricFamily(
                "mcp_refserver_instance_busy_seconds",
                "Time each model instance had a request in service",
                labels=["instance"],
            )
            now = time.perf_counter_ns()
            for inst in m.instances:
                busy.add_metric([str(inst.index)], inst.busy_at(now) / 1e9)
            yield busy
        if c.shape_penalty_ms > 0:
            compiles = CounterMetricFamily(
                "mcp_refserver_shape_compiles", "SIMULATED compiles: first requests of a new input shape"
            )
            compiles.add_metric([], m.shapes.compiles)
            yield compiles
        if m.kv is not None:
            info = GaugeMetricFamily(
                "vllm:cache_config_info",
                "SIMULATED KV cache configuration",
                labels=["block_size", "num_gpu_blocks"],
            )
            info.add_metric([str(m.kv.block_tokens), str(m.kv.blocks)], 1.0)
            yield info


class ServerMetrics:
    """The registry behind /metrics; one per server instance, so tests can run several."""

    def __init__(
        self, config: RefServerConfig, stats: ServerStats, gate: Load, model: ServerModel | None = None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes: the real leak
        self.registry.register(_TritonCollector(config, stats, model))
        if model is not None:
            self.registry.register(_TrapCollector(model))
        name = {"model_name": config.model}
        labels = list(name)
        running = Gauge("vllm:num_requests_running", "Requests in service", labels, registry=self.registry)
        running.labels(**name).set_function(lambda: gate.running)
        waiting = Gauge(
            "vllm:num_requests_waiting", "Requests queued for a slot", labels, registry=self.registry
        )
        waiting.labels(**name).set_function(lambda: gate.waiting)
        kv = Gauge(
            "vllm:kv_cache_usage_perc",
            "SIMULATED: fraction of service slots in use (0 when capacity is unlimited)",
            labels,
            registry=self.registry,
        )
        cap = config.capacity * config.instances
        cache = None if model is None else model.kv
        if cache is not None:
            kv.labels(**name).set_function(lambda: cache.usage)  # trap 6: blocks in use / all blocks
        else:
            kv.labels(**name).set_function(lambda: gate.running / cap if cap else 0.0)
        self.preemptions = Counter(
            "vllm:num_preemptions",
            "Preemptions (only with the KV-cache knob: a request that could not get a block)",
            labels,
            registry=self.registry,
        ).labels(**name)
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Arrival to first token, queueing included",
            labels,
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        ).labels(**name)
        self.tpot = Histogram(
            "vllm:time_per_output_token_seconds",
            "Gap between consecutive output tokens",
            labels,
            buckets=_TPOT_BUCKETS,
            registry=self.registry,
        ).labels(**name)
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Arrival to last token",
            labels,
            buckets=_E2E_BUCKETS,
            registry=self.registry,
        ).labels(**name)
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Output tokens generated", labels, registry=self.registry
        ).labels(**name)
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Prompt tokens processed", labels, registry=self.registry
        ).labels(**name)

    def render(self) -> bytes:
        """Prometheus text format; Triton counters keep Triton's suffix-less names."""
        text = generate_latest(self.registry).decode()
        for name in TRITON_COUNTERS:
            text = text.replace(f"# HELP {name}_total ", f"# HELP {name} ").replace(
                f"# TYPE {name}_total counter", f"# TYPE {name} counter"
            )
        return text.encode()
