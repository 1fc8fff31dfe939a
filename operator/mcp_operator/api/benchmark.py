"""MCPBenchmark: a GPU benchmark run as an Indexed Job whose shards the operator merges."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcp_bench.plan import Arrival, Backend, Overload

from .common import ApiModel, Condition, TargetRef, Verdict, cel, with_rules

KIND = "MCPBenchmark"
PLURAL = "mcpbenchmarks"
MAX_RESULT_ROWS = 32


class BenchmarkTarget(ApiModel):
    model_config = with_rules(
        cel("has(self.url) != has(self.serviceRef)", "set exactly one of url and serviceRef"),
    )

    url: str | None = Field(
        default=None,
        description="Endpoint URL the shards load.",
        pattern=r"^(https?://)?[^\s/]+(/.*)?$",
        max_length=2048,
    )
    service_ref: TargetRef | None = Field(default=None, description="In-cluster Service to load.")
    backend: Backend = Field(default="http", description="Wire protocol.")
    model: str = Field(default="", description="Model name as the server knows it.", max_length=256)
    path: str = Field(default="/", description="Request path for the plain HTTP backend.", pattern=r"^/")


class BenchmarkLoad(ApiModel):
    model_config = with_rules(
        cel(
            "has(self.concurrency) != has(self.rate)",
            "set exactly one of concurrency (closed loop) and rate (open loop)",
        ),
        cel(
            "has(self.durationSeconds) || has(self.requests)",
            "set durationSeconds and/or requests so every level ends",
        ),
    )

    concurrency: list[int] | None = Field(
        default=None,
        description="Closed-loop concurrency levels, swept in order (per shard).",
        min_length=1,
        max_length=16,
        json_schema_extra={"items": {"minimum": 1, "maximum": 4096}},
    )
    rate: list[float] | None = Field(
        default=None,
        description="Open-loop request rates per shard, swept in order.",
        min_length=1,
        max_length=16,
        json_schema_extra={"items": {"exclusiveMinimum": 0, "maximum": 1_000_000}},
    )
    arrival: Arrival = Field(
        default="poisson",
        description="Open-loop arrival process.",
    )
    duration_seconds: float | None = Field(
        default=None, gt=0, le=86400, description="Measured time per level."
    )
    requests: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Requests per level and shard."
    )
    warmup_seconds: float = Field(default=0, ge=0, le=3600, description="Unmeasured warm-up per level.")
    request_timeout_seconds: float = Field(default=30, gt=0, le=3600, description="Per-request timeout.")
    overload: Overload = Field(
        default="late",
        description="Open loop, when no connection is free: send the arrival late (counted late) or drop it "
        "(counted dropped); never skipped silently.",
    )
    engine: Literal["builtin", "locust", "k6"] = Field(
        default="builtin",
        description="Load generator in the shard pods: the built-in engine, Locust (plain HTTP), or k6 "
        "(plain HTTP; the runner image must bring its own k6, which this project does not ship).",
    )


class BenchmarkSlo(ApiModel):
    latency_p99_ms: float | None = Field(default=None, gt=0, description="Highest acceptable P99 latency.")
    latency_p95_ms: float | None = Field(default=None, gt=0, description="Highest acceptable P95 latency.")
    ttft_p99_ms: float | None = Field(
        default=None, gt=0, description="Highest acceptable P99 time to first token."
    )
    throughput_rps: float | None = Field(
        default=None, gt=0, description="Lowest acceptable cluster-wide throughput."
    )
    max_error_rate: float | None = Field(
        default=None, ge=0, le=1, description="Highest acceptable error share."
    )


class Toleration(ApiModel):
    """A pod toleration, as Kubernetes defines it (e.g. for the nvidia.com/gpu taint)."""

    key: str | None = Field(default=None, description="Taint key to tolerate; empty with Exists: all.")
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists, or Equal to compare the value (default Equal)."
    )
    value: str | None = Field(default=None, description="Taint value, with operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to tolerate; empty: all effects."
    )
    toleration_seconds: int | None = Field(
        default=None, description="With NoExecute: how long the pod stays once the taint appears."
    )


class RunnerSpec(ApiModel):
    """Where and how the shard pods run."""

    image: str | None = Field(
        default=None,
        description="Runner image; unset uses the operator's runner image (its MCP_RUNNER_IMAGE).",
        min_length=1,
    )
    gpus: int = Field(default=0, ge=0, le=16, description="nvidia.com/gpu per shard pod.")
    cpu: str = Field(default="1", description="CPU request per shard pod.")
    memory: str = Field(default="1Gi", description="Memory request per shard pod.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node labels the shards need.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Tolerations of the shard pods.")
    runtime_class_name: str | None = Field(default=None, description="RuntimeClass, e.g. nvidia.")
    service_account_name: str | None = Field(
        default=None, description="Service account of the shards; default: one the operator creates."
    )
    active_deadline_seconds: int = Field(default=3600, ge=1, description="Hard limit for the whole Job.")
    backoff_limit: int = Field(default=0, ge=0, le=10, description="Retries of a failed shard.")


class MCPBenchmarkSpec(ApiModel):
    target: BenchmarkTarget = Field(description="The endpoint under test.")
    load: BenchmarkLoad = Field(description="Load model, levels and stage lengths.")
    shards: int = Field(default=1, ge=1, le=256, description="Parallel shard pods (Indexed Job completions).")
    runner: RunnerSpec = Field(default_factory=RunnerSpec, description="Shard pod placement and resources.")
    slo: BenchmarkSlo = Field(default_factory=BenchmarkSlo, description="Objectives for the verdict.")
    suspend: bool = Field(default=False, description="Suspends the Job; resuming continues the run.")
    ttl_seconds_after_finished: int | None = Field(
        default=3600, ge=0, description="Delete the finished Job after this long (results stay in status)."
    )


class LevelRow(ApiModel):
    """One row of the merged result table."""

    level: str = Field(
        description="Concurrency or rate of this level, cluster-wide: summed over all shards "
        "(spec.load.concurrency and spec.load.rate are per shard)."
    )
    requests: int = Field(ge=0, description="Completed requests over all shards.")
    errors: int = Field(
        ge=0,
        description="Requests offered and not completed over all shards: failed plus dropped, the count "
        "the error-rate SLO judges (mcp-bench shows the same figure).",
    )
    latency: str = Field(
        default="e2e",
        description="Which latency the figures are: e2e_from_schedule (from the scheduled send, open loop) "
        "or e2e (from the actual send).",
    )
    throughput_rps: str = Field(description="Completed requests per second.")
    mean_ms: str = Field(description="Mean end-to-end latency.")
    p50_ms: str = Field(description="Median end-to-end latency.")
    p95_ms: str = Field(description="P95 end-to-end latency.")
    p99_ms: str = Field(description="P99 end-to-end latency.")
    gpu_memory_peak_percent: str = Field(
        default="unavailable", description="GPU memory peak, or unavailable."
    )
    slo: str = Field(default="", description="Pass, Fail or empty when no SLO applies.")


class ShardSummary(ApiModel):
    expected: int = Field(ge=0, description="Shards the Job runs.")
    reported: int = Field(default=0, ge=0, description="Shard results found with a valid checksum.")
    rejected: int = Field(default=0, ge=0, description="Shard results rejected (bad checksum or shape).")
    succeeded: int = Field(default=0, ge=0, description="Shard pods that completed.")
    failed: int = Field(default=0, ge=0, description="Shard pods that failed.")


class MCPBenchmarkStatus(ApiModel):
    observed_generation: int | None = Field(default=None, description="Generation the status reflects.")
    phase: str | None = Field(
        default=None, description="Pending, Running, Succeeded, Failed, Suspended, Invalid."
    )
    verdict: Verdict | None = Field(default=None, description="SLO verdict over all levels.")
    job_name: str | None = Field(default=None, description="The owned Indexed Job.")
    target_url: str | None = Field(default=None, description="URL the shards load.")
    report_name: str | None = Field(default=None, description="ConfigMap holding the merged result document.")
    started_at: str | None = Field(default=None, description="When the Job was created.")
    completed_at: str | None = Field(default=None, description="When the results were merged.")
    p99_ms: str | None = Field(default=None, description="P99 latency of the last level (printer column).")
    throughput_rps: str | None = Field(default=None, description="Throughput of the last level.")
    engine: dict[str, str] = Field(
        default_factory=dict,
        description="Server and client fingerprint: serverName, serverVersion, clientName, "
        "engineVersion, ...",
    )
    shards: ShardSummary | None = Field(default=None, description="Shard accounting.")
    results: list[LevelRow] = Field(
        default_factory=list, description="Merged per-level figures.", max_length=MAX_RESULT_ROWS
    )
    conditions: list[Condition] = Field(default_factory=list, description="Accepted, Complete and Ready.")
