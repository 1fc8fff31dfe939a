"""MCPBenchmark: a GPU benchmark run as an Indexed Job whose shards the operator merges."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from mcp_bench.plan import Arrival, Backend, ClassBackend, Connections, Overload

from .barrier import BenchmarkProgress, StartBarrierSpec
from .common import (
    DNS_SUBDOMAIN,
    INT32_MAX,
    LABEL_VALUE,
    MAX_HEADERS,
    QUALIFIED_NAME,
    QUANTITY,
    ApiModel,
    Condition,
    TargetHeader,
    TargetRef,
    Verdict,
    cel,
    with_rules,
)
from .consistency import ConsistencySpec
from .credentials import CREDENTIALS_HINT, no_credentials, no_credentials_in_query, rules_extra
from .observe import GpuSamplerSpec, PrometheusSource
from .ports import port_in_range
from .search import SEARCH_RULES, BenchmarkSearch, SearchStatus
from .workload import DatasetSpec, DistributionSpec, ImagePartsSpec, ImageTensorSpec

KIND = "MCPBenchmark"
PLURAL = "mcpbenchmarks"
MAX_RESULT_ROWS = 32
MAX_SHARDS = 256
MAX_NODE_SELECTOR = 32
MAX_PREFLIGHT_FINDINGS = 8
MAX_LEVELS = 16  # of spec.load.concurrency and spec.load.rate
PreflightMode = Literal["strict", "warn", "off"]

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
    backend: Backend = Field(default="http", description="Wire protocol.")
    model: str = Field(default="", description="Model name as the server knows it.", max_length=256)
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
        *SEARCH_RULES,
    )

    concurrency: list[int] | None = Field(
        default=None,
        description="Closed-loop concurrency levels, swept in order (per shard).",
        min_length=1,
        max_length=MAX_LEVELS,
        json_schema_extra={"items": {"minimum": 1, "maximum": 4096}},
    )
    rate: list[float] | None = Field(
        default=None,
        description="Open-loop request rates per shard, swept in order.",
        min_length=1,
        max_length=MAX_LEVELS,
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
    connections: Connections | None = Field(
        default=None,
        description="warm: connections opened (and TLS handshaken) before each level's measured window "
        "(the builtin engine's default); cold: opened by the level's requests; per-request: a new "
        "connection for every request. Connect and TLS times are reported per level on their own. "
        "Locust and k6 run cold only.",
    )
    ramp_seconds: float = Field(
        default=0,
        ge=0,
        le=3600,
        description="Closed loop: workers start spread over this time; open loop: the rate rises linearly "
        "from 0 over it (builtin engine only).",
    )
    engine: Literal["builtin", "locust", "k6"] = Field(
        default="builtin",
        description="Load generator in the shard pods: the built-in engine, Locust (plain HTTP), or k6 "
        "(plain HTTP; the runner image must bring its own k6, which this project does not ship).",
    )
    search: BenchmarkSearch | None = Field(
        default=None,
        description="Saturation search: find the highest load that meets spec.slo (max goodput) and the "
        "knee, starting from the one level given; one shard only.",
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

    model_config = with_rules(
        cel(
            "!has(self.value) || self.value == '' || !has(self.operator) || self.operator != 'Exists'",
            "value must be empty when operator is Exists",
        ),
        cel(
            "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            "tolerationSeconds applies to effect NoExecute only",
        ),
    )

    key: str | None = Field(
        default=None,
        description="Taint key to tolerate; empty with Exists: all.",
        max_length=317,
        pattern=f"^$|{QUALIFIED_NAME}",
    )
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists, or Equal to compare the value (default Equal)."
    )
    value: str | None = Field(
        default=None, description="Taint value, with operator Equal.", max_length=63, pattern=LABEL_VALUE
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to tolerate; empty: all effects."
    )
    toleration_seconds: int | None = Field(
        default=None, description="With NoExecute: how long the pod stays once the taint appears."
    )


class RunnerSpec(ApiModel):
    """Where and how the shard pods run."""

    model_config = with_rules(
        cel(
            "!has(self.memoryLimit) || !has(self.memory) || "
            "!quantity(self.memoryLimit).isLessThan(quantity(self.memory))",
            "memoryLimit must not be below memory (the request)",
            ".memoryLimit",
        ),
    )

    image: str | None = Field(
        default=None,
        description="Runner image; unset uses the operator's runner image (its MCP_RUNNER_IMAGE).",
        min_length=1,
        max_length=1024,
        pattern=r"^[^\s]+$",
    )
    gpus: int = Field(default=0, ge=0, le=16, description="nvidia.com/gpu per shard pod.")
    cpu: str = Field(
        default="1",
        description="CPU request per shard pod (a quantity: 2, 500m).",
        max_length=64,
        pattern=QUANTITY,
    )
    memory: str = Field(
        default="1Gi",
        description="Memory request per shard pod (a quantity: 512Mi, 8Gi).",
        max_length=64,
        pattern=QUANTITY,
    )
    memory_limit: str | None = Field(
        default=None,
        description="Memory limit per shard pod (a quantity, at least memory); unset: no limit. A shard "
        "killed at it ends the run with Ready False, reason ShardFailed, naming the pod and OOMKilled.",
        max_length=64,
        pattern=QUANTITY,
    )
    node_selector: dict[str, Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)]] = Field(
        default_factory=dict,
        description="Node labels the shards need (keys are qualified names, values label values).",
        max_length=MAX_NODE_SELECTOR,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"self.all(k, k.size() <= 317 && k.matches('{QUALIFIED_NAME}'))",
                    "nodeSelector keys must be qualified names: [prefix/]name, name at most 63 characters "
                    "of alphanumerics, '-', '_' and '.'",
                )
            ]
        },
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Tolerations of the shard pods.", max_length=32
    )
    runtime_class_name: str | None = Field(
        default=None, description="RuntimeClass, e.g. nvidia.", max_length=253, pattern=DNS_SUBDOMAIN
    )
    service_account_name: str | None = Field(
        default=None,
        description="Service account of the shards; default: one the operator creates for the run. Either "
        "way the run's Role (update of this run's result ConfigMaps only) is bound to it.",
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )
    active_deadline_seconds: int = Field(
        default=3600, ge=1, le=INT32_MAX, description="Hard limit for the whole Job."
    )
    backoff_limit: int = Field(default=0, ge=0, le=10, description="Retries of a failed shard.")

    @field_validator("node_selector")
    @classmethod
    def _qualified_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if len(key) > 317 or not re.match(QUALIFIED_NAME, key):
                raise ValueError(f"nodeSelector key {key!r} is not a qualified name ([prefix/]name)")
        return value


MAX_OBSERVE_SOURCES = 8
MAX_CLASSES = 16
MAX_SHAPES = 64
MAX_DIAGNOSTICS = 16
CLASS_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
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
        default=1.0,
        ge=0.05,
        le=60,
        description="Also sample the endpoints' queue, KV-cache and utilisation gauges this often during "
        "each level.",
    )
    settle_seconds: float = Field(
        default=0,
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


def class_path_field(description: str) -> Any:
    """A request class's path (a benchmark's and a drill's mix alike): appended to the target's
    URL, its query checked for credentials as the target's path is."""
    return Field(
        default=None,
        max_length=1024,
        pattern=r"^/",
        description=description,
        json_schema_extra=rules_extra(no_credentials_in_query("class path")),
    )


class RequestClassSpec(ApiModel):
    name: str = Field(description="Class name, reported per class.", max_length=63, pattern=CLASS_NAME)
    weight: float = Field(default=1.0, gt=0, le=1_000_000, description="Share of the requests, relative.")
    priority: int | None = Field(
        default=None,
        ge=-1_000_000,
        le=1_000_000,
        description="Sent as the request's priority (lower is served first, as vLLM); unset sends none.",
    )
    latency_p99_ms: float | None = Field(
        default=None, gt=0, description="This class's P99 objective (default spec.slo.latencyP99Ms)."
    )
    images: ImagePartsSpec | None = Field(
        default=None, description="This class's images as chat content parts (default: the workload's)."
    )
    image_tensor: ImageTensorSpec | None = Field(
        default=None, description="This class's V2 image tensor (default: the workload's)."
    )
    backend: ClassBackend | None = Field(
        default=None,
        description="With spec.target.backend mix: this class's protocol (required there, and only there).",
    )
    path: str | None = class_path_field(
        "With backend mix: appended to the target's URL for this class (http: the request path)."
    )
    model: str | None = Field(
        default=None,
        max_length=256,
        description="With backend mix: this class's model (default: the target's).",
    )


class ShapeSweepSpec(ApiModel):
    input_tokens: list[Annotated[int, Field(ge=1, le=1_000_000)]] = Field(
        description="Prompt lengths, walked through in order.", min_length=1, max_length=MAX_SHAPES
    )
    repeats: int = Field(default=8, ge=1, le=100_000, description="Requests of each shape before the next.")


_SYNTHETIC = "has(self.inputTokens) || has(self.outputTokens) || has(self.sharedPrefixRatio)"


class BenchmarkWorkload(ApiModel):
    """What the requests carry beyond the fixed prompt: synthetic prompts (length distributions, a
    shared prefix) or a JSONL dataset, classes with priorities (latency is reported per class), a
    shape sweep (the first hit of every new shape against the same shape warm), and images."""

    model_config = with_rules(
        cel(
            f"!has(self.dataset) || !({_SYNTHETIC})",
            "a dataset brings its own prompts: no inputTokens, outputTokens or sharedPrefixRatio with it",
        ),
        cel(
            f"!has(self.shapeSweep) || !(has(self.dataset) || {_SYNTHETIC})",
            "a shapeSweep sets the prompts itself: no dataset, inputTokens, outputTokens, sharedPrefixRatio",
        ),
    )

    input_tokens: DistributionSpec | None = Field(
        default=None, description="Synthetic prompts: words (one token each) per prompt."
    )
    output_tokens: DistributionSpec | None = Field(
        default=None,
        description="Synthetic prompts: max_tokens per request (default maxOutputTokens, else 64).",
    )
    shared_prefix_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Synthetic prompts: share of each prompt that is one prefix common to all.",
    )
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1, description="Seed of the synthetic prompts.")
    dataset: DatasetSpec | None = Field(
        default=None, description="Prompts from a JSONL file, cycled in order."
    )
    images: ImagePartsSpec | None = Field(
        default=None,
        description="Images as OpenAI chat content parts in every request (backend openai-chat).",
    )
    image_tensor: ImageTensorSpec | None = Field(
        default=None, description="A V2 image tensor in every request (backends triton-http, triton-grpc)."
    )
    classes: list[RequestClassSpec] = Field(
        default_factory=list, description="Request classes.", max_length=MAX_CLASSES
    )
    shape_sweep: ShapeSweepSpec | None = Field(default=None, description="Walk through prompt lengths.")
    max_output_tokens: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Output tokens per request (LLM backends; default 16)."
    )

    @model_validator(mode="after")
    def _one_prompt_source(self) -> BenchmarkWorkload:
        synthetic = any(
            v is not None for v in (self.input_tokens, self.output_tokens, self.shared_prefix_ratio)
        )
        if self.dataset is not None and synthetic:
            raise ValueError(
                "a dataset brings its own prompts: no inputTokens, outputTokens or sharedPrefixRatio"
            )
        if self.shape_sweep is not None and (synthetic or self.dataset is not None):
            raise ValueError("a shapeSweep sets the prompts itself: no dataset, inputTokens, outputTokens")
        return self


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
