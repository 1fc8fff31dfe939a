"""What MCPBenchmark's status reports per run: the merged level rows, the shard accounting, the
diagnosis's findings and the preflight's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import ApiModel

MAX_RESULT_ROWS = 32
MAX_PREFLIGHT_FINDINGS = 8
MAX_DIAGNOSTICS = 16
PreflightMode = Literal["strict", "warn", "off"]


class LevelRow(ApiModel):
    """One row of the merged result table."""

    level: str = Field(
        description="Concurrency or rate of this level, cluster-wide: summed over all shards "
        "(spec.load.concurrency and spec.load.rate are per shard)."
    )
    requests: int = Field(
        ge=0,
        description="Completed requests over all shards, as completed (the field's first name; divide by "
        "offered, not by this, for a ratio).",
    )
    completed: int | None = Field(default=None, ge=0, description="Completed requests over all shards.")
    offered: int | None = Field(
        default=None,
        ge=0,
        description="Requests offered over all shards: completed, failed and dropped; what a success or "
        "error ratio divides by.",
    )
    errors: int = Field(
        ge=0,
        description="Requests offered and not completed over all shards: failed plus dropped, the count "
        "the error-rate SLO judges (mcp-bench shows the same figure).",
    )
    error_percent: str | None = Field(
        default=None, description="errors / offered, in percent (n/a when nothing was offered)."
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
    serving_gpu_memory_peak_percent: str | None = Field(
        default=None,
        description="The serving GPUs' memory peak (spec.observe: the DCGM exporter or the GPU sampler), "
        "or unavailable; absent when they are not observed. gpuMemoryPeakPercent is the load generator's.",
    )
    serving_gpu_util_percent: str | None = Field(
        default=None, description="Mean SM utilisation of the serving GPUs over the level, or unavailable."
    )
    serving_gpu_power_watts: str | None = Field(
        default=None, description="Mean power of the serving GPUs over the level, or unavailable."
    )
    serving_gpu_source: str | None = Field(
        default=None,
        description="Where the serving GPUs' figures come from, or why a source gave none.",
        max_length=512,
    )
    server_metrics: dict[str, str] = Field(
        default_factory=dict,
        description="The server's side over the level (spec.observe), one figure per source and metric: "
        "'<source>/<metric>' -> '+N' (a counter's increase), 'max N' (a gauge), 'n N, mean M' (a "
        "histogram); 'unavailable: why' for a source that could not be read, 'missing' for a metric it "
        "did not serve. Bounded; the report holds every series.",
    )
    output_consistency: str | None = Field(
        default=None,
        description="spec.consistency: Found, NotFound or NoData, with the probes' token mismatch rate and "
        "largest L2 distance against their answers at rest; absent when not probed.",
        max_length=256,
    )
    overlap_percent: str = Field(
        default="n/a",
        description="Share of the level's time every shard was measuring (n/a with one shard).",
    )
    cluster_wide: bool = Field(
        default=True,
        description="False when the shards' windows overlapped less than startBarrier.minOverlap: the "
        "figures are then no cluster-wide figure (condition ShardsOverlapped False).",
    )
    client_bound: str | None = Field(
        default=None,
        description="Why the load generator itself was the limit (a client process near a full core, or "
        "its schedule lagging): the figures then measure the client as much as the server.",
        max_length=1024,
    )


class ShardSummary(ApiModel):
    expected: int = Field(ge=0, description="Shards the Job runs.")
    reported: int = Field(
        default=0,
        ge=0,
        description="Shard results accepted and merged: one per index, from the object the operator named, "
        "signed with the run's key by a pod of the run's Job.",
    )
    rejected: int = Field(
        default=0,
        ge=0,
        description="Shard results rejected and not merged (unexpected object, wrong owner, run, pod or "
        "index, bad signature, checksum or shape); each one is a ShardResultRejected event.",
    )
    succeeded: int = Field(default=0, ge=0, description="Shard pods that completed.")
    failed: int = Field(default=0, ge=0, description="Shard pods that failed.")


class DiagnosticFinding(ApiModel):
    """One hidden-latency-trap detector's answer on the merged result (mcp-bench diagnose)."""

    trap: int = Field(ge=0, le=12, description="Trap number 1-12; 0 is the bottleneck-layer screening.")
    key: str = Field(description="Short name of the detector, e.g. false-wait.", max_length=64)
    name: str = Field(description="The trap.", max_length=128)
    state: Literal["Found", "NotFound", "NoData"] = Field(
        description="Found; NotFound (the data was there and shows no trap); NoData (see needs)."
    )
    summary: str = Field(description="What was seen, in one line.", max_length=1024)
    level: str | None = Field(default=None, description="The load level that decided, if any.")
    values: dict[str, str] = Field(default_factory=dict, description="The figures judged.")
    thresholds: dict[str, str] = Field(
        default_factory=dict, description="The thresholds they were judged by."
    )
    source: str = Field(default="", description="Where the figures come from.", max_length=512)
    advice: str = Field(default="", description="What to do about it.", max_length=512)
    needs: str = Field(default="", description="NoData: the data that would decide it.", max_length=512)


class PreflightFinding(ApiModel):
    """One thing the preflight found that would stop or stall the run."""

    reason: str = Field(description="CamelCase reason, e.g. InsufficientGpu.", max_length=128)
    message: str = Field(description="What was found.", max_length=512)


class PreflightStatus(ApiModel):
    mode: PreflightMode = Field(description="spec.preflight as it was applied.")
    findings: list[PreflightFinding] = Field(
        default_factory=list, description="Findings, one reason each.", max_length=MAX_PREFLIGHT_FINDINGS
    )
    server: dict[str, str] = Field(
        default_factory=dict,
        description="The target's fingerprint as it answered the preflight: serverName, serverVersion.",
    )
