"""spec.observe: the server's side read around each level (metrics endpoints, Triton's statistics),
PromQL through a named Prometheus, and the node-level NVML sampler of the serving GPUs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from mcp_bench.models import Observe

from .common import ApiModel, TargetRef, cel, with_rules
from .credentials import no_credentials, rules_extra
from .engine import engine_default
from .ports import port_in_range

MAX_PROMQL = 16
PROMQL_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
DEFAULT_DRIVER_LIBRARY = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"


class PromQuerySpec(ApiModel):
    name: str = Field(description="Name the answer is reported under.", pattern=PROMQL_NAME, max_length=128)
    query: str = Field(description="PromQL expression (an instant vector).", min_length=1, max_length=4096)
    type: Literal["gauge", "counter"] = Field(
        default="gauge", description="gauge: before, after, max; counter: the level's delta and rate."
    )


class PrometheusSource(ApiModel):
    """A Prometheus server the shards query before and after each level. Its URL passes the
    operator's target policy, as spec.target's does."""

    model_config = with_rules(
        cel("has(self.url) != has(self.serviceRef)", "set exactly one of url and serviceRef"),
        cel(
            "self.queries.all(q, self.queries.exists_one(r, r.name == q.name))",
            "query names must be distinct",
        ),
    )

    url: str | None = Field(
        default=None,
        description="Prometheus base URL, without credentials (CredentialsInUrl).",
        pattern=r"^https?://\S+$",
        max_length=2048,
        json_schema_extra=rules_extra(no_credentials("prometheus url"), port_in_range("prometheus url")),
    )
    service_ref: TargetRef | None = Field(
        default=None, description="In-cluster Prometheus Service (e.g. port 9090)."
    )
    queries: list[PromQuerySpec] = Field(
        description="PromQL read around each level.", min_length=1, max_length=MAX_PROMQL
    )

    @model_validator(mode="after")
    def _one_address(self) -> PrometheusSource:
        # the CEL rule, for specs the operator parses itself (an older CRD, the CLI)
        if (self.url is None) == (self.service_ref is None):
            raise ValueError("set exactly one of url and serviceRef")
        names = [q.name for q in self.queries]
        if len(set(names)) != len(names):
            raise ValueError(f"query names must be distinct, got {names}")
        return self


class GpuSamplerSpec(ApiModel):
    """The serving GPUs, sampled on their nodes: one short-lived pod per node that runs the
    target's pods (found from the Service's EndpointSlices), pinned there by node affinity,
    requesting no GPU, reading NVML through the host's device files and driver library
    (hostPath). Each level's figures are labelled ``serving``; without NVML it says
    ``unavailable`` and why."""

    service_ref: TargetRef | None = Field(
        default=None,
        description="Service whose pods serve the model (default spec.target.serviceRef); its "
        "EndpointSlices name the nodes.",
    )
    interval_seconds: float = Field(
        default=0.1, ge=0.005, le=60, description="Sampling interval, 5 ms and up."
    )
    driver_library_path: str = Field(
        default=DEFAULT_DRIVER_LIBRARY,
        description="Path of libnvidia-ml.so.1 on the nodes (the driver's library, mounted read-only "
        "into the sampler; e.g. /run/nvidia/driver/usr/lib64/libnvidia-ml.so.1 under the GPU operator).",
        pattern=r"^/[^\s]*libnvidia-ml[^/\s]*$",
        max_length=512,
    )


MAX_OBSERVE_SOURCES = 8
_OBSERVE_SOURCE = r"^(triton|vllm|dcgm)(=https?://\S+)?$|^https?://\S+$"
_STATS_SOURCE = r"^[A-Za-z0-9_.-]{1,256}(=https?://\S+)?$"


class BenchmarkObserve(ApiModel):
    """The server's side, read before and after each level (and sampled during it), so the run's
    diagnosis (status.diagnostics) has the data it needs. URLs must pass the operator's target
    policy, like spec.target."""

    server_metrics: list[
        Annotated[
            str,
            Field(
                max_length=2048,
                pattern=_OBSERVE_SOURCE,
                json_schema_extra=rules_extra(
                    no_credentials("serverMetrics entry"), port_in_range("serverMetrics entry")
                ),
            ),
        ]
    ] = Field(
        default_factory=list,
        description="Prometheus endpoints to read: 'triton' or 'vllm' (the target's own /metrics), "
        "'triton=URL', 'vllm=URL' (e.g. Triton's :8002), 'dcgm' (the DCGM exporter at the target's host, "
        "port 9400) or 'dcgm=URL' (the serving GPUs: utilisation, frame buffer, power per GPU per level), "
        "or any Prometheus text URL.",
        max_length=MAX_OBSERVE_SOURCES,
    )
    triton_stats: list[
        Annotated[
            str,
            Field(
                max_length=2048,
                pattern=_STATS_SOURCE,
                json_schema_extra=rules_extra(
                    no_credentials("tritonStats entry"), port_in_range("tritonStats entry")
                ),
            ),
        ]
    ] = Field(
        default_factory=list,
        description="Triton's statistics extension of these models: MODEL (at the target) or MODEL=URL.",
        max_length=MAX_OBSERVE_SOURCES,
    )
    timeline_interval_seconds: float | None = Field(
        default=engine_default(Observe, "timeline_interval_s"),
        ge=0.05,
        le=60,
        description="Also sample the endpoints' queue, KV-cache and utilisation gauges this often during "
        "each level.",
    )
    settle_seconds: float = Field(
        default=engine_default(Observe, "settle_s"),
        ge=0,
        le=600,
        description="After each level, this long with no load before the next, with memory read again at "
        "its end, so the GPU-memory forensics can tell memory a level borrowed from memory it kept.",
    )
    prometheus: PrometheusSource | None = Field(
        default=None, description="PromQL read through a named Prometheus before and after each level."
    )
    gpu_sampler: GpuSamplerSpec | None = Field(
        default=None,
        description="The serving GPUs' NVML telemetry from a sampler pod on each node of the target's "
        "pods (no GPU request); the shards' own GPUs stay reported as the load generator's.",
    )
