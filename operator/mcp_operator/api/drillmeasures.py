"""What a drill measures beyond its probes and load, and the faults that need more than a name:
the target's request counter (retry amplification), the workload an autoscaler scales (its
lag), the clients' retry behaviour reproduced by the load, and Chaos Mesh experiments."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from mcp_bench.models import Retry

from .common import ApiModel
from .credentials import no_credentials, rules_extra
from .engine import engine_default
from .ports import port_in_range

PROMETHEUS_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
ChaosKind = Literal[
    "NetworkChaos", "StressChaos", "PodChaos", "IOChaos", "HTTPChaos", "DNSChaos", "TimeChaos"
]


class ServerRequests(ApiModel):
    """The target's own count of the requests it received, read from Prometheus-format metrics
    before and after each stage's load: the server's side of retry amplification."""

    urls: list[
        Annotated[
            str,
            Field(
                pattern=r"^https?://",
                max_length=2048,
                json_schema_extra=rules_extra(
                    no_credentials("serverRequests url"), port_in_range("serverRequests url")
                ),
            ),
        ]
    ] = Field(
        min_length=1,
        max_length=8,
        description="Metrics endpoints whose counters are summed (every replica, or one that aggregates).",
    )
    counters: list[Annotated[str, Field(pattern=PROMETHEUS_NAME, max_length=200)]] = Field(
        min_length=1,
        max_length=4,
        description="Request counters, summed: e.g. http_requests_total, or Triton's "
        "nv_inference_request_success and nv_inference_request_failure (a _total suffix may be left out).",
    )
    match_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Only series with all of these labels (e.g. the load's path), summed over the rest.",
    )


class Autoscaling(ApiModel):
    """The workload a HorizontalPodAutoscaler scales: the drill reads the autoscaler's status and
    the workload's pods all along, and reports the lag from each rise of the load to the desired
    replicas rising and to the new pods being Ready."""

    workload: str = Field(min_length=1, max_length=253, description="A Deployment of this namespace.")


class LoadRetry(ApiModel):
    """How the load's clients retry, to reproduce the service's real clients on purpose: retries
    without backoff turn an overload into a retry storm, which the retry-amplification KPI shows."""

    attempts: int = Field(
        default=engine_default(Retry, "attempts"),
        ge=1,
        le=20,
        description="Attempts per request, the first included.",
    )
    backoff_ms: float = Field(
        default=engine_default(Retry, "backoff_ms"),
        ge=0,
        le=60_000,
        description="Wait before the first retry, doubled for each next one.",
    )
    max_backoff_ms: float = Field(
        default=engine_default(Retry, "max_backoff_ms"), gt=0, le=600_000, description="The longest wait."
    )
    jitter: bool = Field(
        default=engine_default(Retry, "jitter"),
        description="Full jitter: each wait drawn uniformly below it.",
    )


class ChaosExperiment(ApiModel):
    """A Chaos Mesh experiment (chaos-mesh.org/v1alpha1) created in this namespace for the fault's
    hold and deleted on revert. Its selector may only name this namespace."""

    kind: ChaosKind = Field(description="The Chaos Mesh kind.")
    spec: dict[str, Any] = Field(description="The experiment's spec, as Chaos Mesh documents it.")
    inject_timeout_seconds: float = Field(
        default=30, gt=0, le=600, description="How long to wait for the AllInjected condition."
    )
    recover_timeout_seconds: float = Field(
        default=30,
        gt=0,
        le=600,
        description="How long a deleted experiment may take to be recovered and gone.",
    )
