"""MCPBenchmark: a GPU benchmark run as an Indexed Job whose shards the operator merges.

The spec's sections have their own modules (``load``, ``runner``, ``observe``, ``classes``,
``consistency``, ``barrier``) and so do status's rows (``results``); this one holds the target
and the resource's spec and status, which tie them together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from mcp_bench.models import Backend, RunPlan
from mcp_checks.models import StatusPart
from mcp_common.tolerant import tolerant

from .barrier import BenchmarkProgress, StartBarrierSpec
from .classes import BenchmarkWorkload
from .common import (
    INT32_MAX,
    MAX_HEADERS,
    ApiModel,
    Condition,
    TargetHeader,
    TargetRef,
    Verdict,
    cel,
    field_of,
    with_rules,
)
from .consistency import ConsistencySpec
from .credentials import CREDENTIALS_HINT, no_credentials, no_credentials_in_query, rules_extra
from .engine import engine_default
from .load import BenchmarkLoad, BenchmarkSlo
from .observe import BenchmarkObserve
from .ports import port_in_range
from .results import (
    MAX_DIAGNOSTICS,
    MAX_RESULT_ROWS,
    DiagnosticFinding,
    LevelRow,
    PreflightMode,
    PreflightStatus,
    ShardSummary,
)
from .runner import RunnerSpec
from .search import SearchStatus

KIND = "MCPBenchmark"
PLURAL = "mcpbenchmarks"
MAX_SHARDS = 256

# A URL that carries credentials is refused at apply time (``api.credentials``), so the credential
# never reaches etcd, the Job or status; the target's own messages say where credentials go instead.
TARGET_HINT = f"{CREDENTIALS_HINT}: send them as spec.target.headers with valueFrom.secretKeyRef"


class BenchmarkTarget(ApiModel):
    model_config = with_rules(
        cel("has(self.url) != has(self.serviceRef)", "set exactly one of url and serviceRef"),
    )

    url: str | None = Field(
        default=None,
        description="Endpoint URL the shards load. It must not carry credentials (user:password@ or a "
        "token-like query parameter such as token, api_key, key, sig): such a URL is refused "
        "(CredentialsInUrl); send credentials as headers with valueFrom.secretKeyRef instead.",
        # a host (name, IPv4 or [IPv6]) and port: no other scheme passes (file:///x, gopher://x);
        # userinfo is matched here so that the rule below refuses it with its own message
        pattern=r"^(https?://)?([^\s/@]*@)?([^\s/:\[\]@]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?(/.*)?$",
        max_length=2048,
        json_schema_extra=rules_extra(no_credentials("url", TARGET_HINT), port_in_range("url")),
    )
    service_ref: TargetRef | None = Field(default=None, description="In-cluster Service to load.")
    backend: Backend = Field(default=engine_default(RunPlan, "backend"), description="Wire protocol.")
    model: str = Field(
        default=engine_default(RunPlan, "model"),
        description="Model name as the server knows it.",
        max_length=256,
    )
    path: str = Field(
        default="/",
        description="Request path for the plain HTTP backend; its query must not carry credentials "
        "(CredentialsInUrl), as the url's.",
        pattern=r"^/",
        max_length=2048,
        json_schema_extra=rules_extra(no_credentials_in_query("path", TARGET_HINT)),
    )
    headers: list[TargetHeader] = Field(
        default_factory=list,
        description="HTTP headers sent with every request (backends http, openai and openai-chat). Values "
        "from Secrets reach the shard pods by reference (env valueFrom.secretKeyRef) and are read at run "
        "time; they never appear in the Job, status, events or results.",
        max_length=MAX_HEADERS,
    )


def _media_rule(field: str, backends: tuple[str, ...], message: str) -> dict[str, Any]:
    """Images only where the backend can carry them: on the workload or any of its classes."""
    used = (
        f"has(self.workload) && (has(self.workload.{field}) || "
        f"(has(self.workload.classes) && self.workload.classes.exists(c, has(c.{field}))))"
    )
    allowed = " || ".join(f"self.target.backend == '{b}'" for b in backends)
    return cel(f"!({used}) || {allowed}", message, ".workload")


class MCPBenchmarkSpec(ApiModel):
    model_config = with_rules(
        _media_rule(
            "images", ("openai-chat",), "workload images (chat content parts) need backend openai-chat"
        ),
        _media_rule(
            "imageTensor",
            ("triton-http", "triton-grpc"),
            "workload imageTensor (V2) needs backend triton-http or triton-grpc",
        ),
        cel(
            "!has(self.consistency) || self.target.backend != 'http'",
            "consistency needs an openai, openai-chat or triton backend: answers to compare",
            ".consistency",
        ),
    )

    target: BenchmarkTarget = Field(description="The endpoint under test.")
    load: BenchmarkLoad = Field(description="Load model, levels and stage lengths.")
    shards: int = Field(
        default=1, ge=1, le=MAX_SHARDS, description="Parallel shard pods (Indexed Job completions)."
    )
    runner: RunnerSpec = Field(default_factory=RunnerSpec, description="Shard pod placement and resources.")
    slo: BenchmarkSlo = Field(default_factory=BenchmarkSlo, description="Objectives for the verdict.")
    suspend: bool = Field(default=False, description="Suspends the Job; resuming continues the run.")
    ttl_seconds_after_finished: int | None = Field(
        default=3600,
        ge=0,
        le=INT32_MAX,
        description="Delete the finished Job after this long (results stay in status).",
    )
    observe: BenchmarkObserve | None = Field(
        default=None, description="Server-side metrics the shards read around each level."
    )
    workload: BenchmarkWorkload | None = Field(
        default=None, description="Request classes and shape sweeps (per-class and per-shape results)."
    )
    consistency: ConsistencySpec | None = Field(
        default=None,
        description="Output consistency under load: probe requests (deterministic decoding) answered at "
        "rest and during each level, compared (token mismatch rate, L2 of numeric outputs); a level whose "
        "outputs drift past a threshold is a finding.",
    )
    preflight: PreflightMode = Field(
        default="warn",
        description="Checks before any Job (the target answers, some node fits the GPU request, "
        "nodeSelector and tolerations, the namespace's ResourceQuotas allow the pods, the image is named, "
        "the service account exists), written as the PreflightPassed condition. strict: a finding stops "
        "the run before any Job (Ready False with its reason); warn: findings are recorded and the run "
        "goes on; off: skipped.",
    )
    start_barrier: StartBarrierSpec | None = Field(
        default=None,
        description="Shards start each level together at a time the operator writes (default: on for "
        "more than one shard, minOverlap 0.9).",
    )


class MCPBenchmarkStatus(ApiModel):
    observed_generation: int | None = Field(default=None, description="Generation the status reflects.")
    phase: str | None = Field(
        default=None, description="Pending, Running, Succeeded, Failed, Suspended, Invalid."
    )
    verdict: Verdict | None = Field(default=None, description="SLO verdict over all levels.")
    job_name: str | None = Field(default=None, description="The owned Indexed Job.")
    spec_digest: str | None = Field(
        default=None,
        description="Digest of the spec the Job runs (suspend left out): a spec that differs from it "
        "starts a new run with fresh children, also when it equals an earlier one.",
    )
    target_url: str | None = Field(default=None, description="URL the shards load, credentials redacted.")
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
    diagnostics: list[DiagnosticFinding] = Field(
        default_factory=list,
        description="The hidden latency traps, one finding per detector, from the merged result.",
        max_length=MAX_DIAGNOSTICS,
    )
    preflight: PreflightStatus | None = Field(default=None, description="What the preflight found.")
    progress: BenchmarkProgress | None = Field(
        default=None, description="Live progress while the shards run (the last report once done)."
    )
    search: SearchStatus | None = Field(
        default=None, description="What spec.load.search found: the max-goodput load, the knee, the stop."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Accepted, PreflightPassed, Complete, Failed, ShardsOverlapped and Ready.",
    )


def benchmark_status(status: Mapping[str, Any]) -> MCPBenchmarkStatus:
    """A benchmark's status (kopf's ``status``) through its model, tolerant of what an older or
    newer operator wrote (``tolerant``)."""
    return tolerant(MCPBenchmarkStatus, status)


class BenchmarkGlance(StatusPart):
    """The fields the collect timer's filter reads on every tick of every benchmark, declared as
    ``MCPBenchmarkStatus`` declares them; nothing else of the status is parsed."""

    phase: str | None = field_of(MCPBenchmarkStatus, "phase")
    job_name: str | None = field_of(MCPBenchmarkStatus, "job_name")

    @property
    def collecting(self) -> bool:
        """A run whose Job exists and is not finished: the collect timer's business."""
        return self.phase == "Running" and bool(self.job_name)


def benchmark_glance(status: Mapping[str, Any]) -> BenchmarkGlance:
    return tolerant(BenchmarkGlance, status)
