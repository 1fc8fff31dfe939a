"""The run plan: everything one benchmark run needs, validated before any traffic is sent.

A plan is the single input of every engine (built-in, Locust, k6) and is copied verbatim into the
result document, so a result always says exactly what was asked for. Wrong fields fail fast with
the pydantic field path (``levels.rate.0: Input should be greater than 0``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from mcp_bench.multimodal import ImageParts, ImageTensor, media_problem
from mcp_bench.search.model import SearchSpec
from mcp_bench.workload import Workload
from mcp_common.redact import REDACTED, redact_text, redact_url

Backend = Literal["http", "openai", "openai-chat", "triton-http", "triton-grpc", "mix"]
# "mix": every request class names its own backend (a traffic mix: health checks, V2 inference and
# chat streaming against one service, each class measured on its own)
ClassBackend = Literal["http", "openai", "openai-chat", "triton-http", "triton-grpc"]
Arrival = Literal["constant", "poisson", "gamma"]
Overload = Literal["late", "drop"]
Connections = Literal["warm", "cold", "per-request"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Levels(_Strict):
    """Either closed-loop concurrency levels or open-loop request rates, swept in order."""

    concurrency: list[int] | None = Field(default=None, min_length=1)
    rate: list[float] | None = Field(default=None, min_length=1)
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0, description="gamma shape; 1 is Poisson, < 1 is burstier")
    seed: int | None = Field(default=0, description="arrival schedule seed; None draws a fresh one")
    max_concurrency: int = Field(default=1024, ge=1, description="open loop: in-flight cap")
    overload: Overload = Field(
        default="late",
        description="open loop, cap reached: 'late' waits and sends late, 'drop' counts it dropped",
    )
    late_after_ms: float = Field(default=1.0, ge=0, description="a send this far behind schedule counts late")
    connections: Connections | None = Field(
        default=None,
        description="'warm': opened (and TLS handshaken) before each level's measured window; 'cold': "
        "the pool is emptied at each level's start and connections open as requests need them; "
        "'per-request': a new connection for every request. None: warm on the builtin engine, an "
        "external engine's own behaviour (a new process per level, so cold)",
    )
    ramp_s: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="closed loop: worker starts spread evenly over this time; open loop: the rate rises "
        "linearly from 0 to the level's rate over it",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Levels:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("give exactly one of 'concurrency' (closed loop) or 'rate' (open loop)")
        for c in self.concurrency or []:
            if c < 1:
                raise ValueError(f"concurrency levels must be >= 1, got {c}")
        for r in self.rate or []:
            if r <= 0:
                raise ValueError(f"rate levels must be > 0, got {r}")
        return self

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def count(self) -> int:
        return len(self.rate if self.rate is not None else self.concurrency or [])


class Stage(_Strict):
    """How long each level runs: warm-up (not measured), then a duration and/or a request count."""

    warmup_s: float = Field(default=0.0, ge=0)
    duration_s: float | None = Field(default=None, gt=0)
    requests: int | None = Field(default=None, ge=1)
    drain_timeout_s: float | None = Field(
        default=None, gt=0, description="how long to wait for in-flight requests; default request timeout"
    )

    @model_validator(mode="after")
    def _bounded(self) -> Stage:
        if self.duration_s is None and self.requests is None:
            raise ValueError("give 'duration_s' and/or 'requests' so every level ends")
        return self


class Slo(_Strict):
    """Service level objectives; every one given is checked per level. Latencies in milliseconds."""

    latency_p99_ms: float | None = Field(default=None, gt=0)
    latency_p95_ms: float | None = Field(default=None, gt=0)
    latency_mean_ms: float | None = Field(default=None, gt=0)
    ttft_p99_ms: float | None = Field(default=None, gt=0)
    tpot_p99_ms: float | None = Field(default=None, gt=0)
    throughput_rps: float | None = Field(default=None, gt=0, description="minimum completed requests/s")
    max_error_rate: float | None = Field(default=None, ge=0, le=1)
    latency_from: Literal["auto", "sent", "scheduled"] = Field(
        default="auto",
        description="latency basis: 'auto' is the scheduled send time in open loop, the actual one in closed",
    )

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in _SLO_TARGETS)


_SLO_TARGETS = (
    "latency_p99_ms",
    "latency_p95_ms",
    "latency_mean_ms",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "throughput_rps",
    "max_error_rate",
)


TAG_VALUE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
MAX_CLASSES = 16
MAX_SHAPES = 64


class RequestClass(_Strict):
    """A class of requests with its share of the load and its priority; latency is reported per
    class (``LevelResult.breakdown['class']``), so a starved low class is seen, not averaged away."""

    name: str = Field(pattern=TAG_VALUE)
    weight: float = Field(default=1.0, gt=0, description="share of requests, relative to the other classes")
    priority: int | None = Field(
        default=None,
        description="sent as the request's 'priority' field (vLLM's convention: lower is served first); "
        "None sends none",
    )
    latency_p99_ms: float | None = Field(
        default=None, gt=0, description="this class's P99 objective (default: the plan's latency_p99_ms)"
    )
    images: ImageParts | None = Field(
        default=None, description="this class's images (default: the payload's)"
    )
    image_tensor: ImageTensor | None = Field(
        default=None, description="this class's V2 image tensor (default: the payload's)"
    )
    backend: ClassBackend | None = Field(
        default=None,
        description="with the plan's backend 'mix': this class's protocol (required there, only there)",
    )
    path: str | None = Field(
        default=None,
        pattern=r"^/",
        description="with backend 'mix': appended to the plan's url for this class (http: the request path)",
    )
    model: str | None = Field(
        default=None, description="with backend 'mix': this class's model (default: the plan's)"
    )


class ShapeSweep(_Strict):
    """Requests walk through input shapes on purpose, ``repeats`` of each in turn, so the first hit
    of every new shape is measured against the same shape warm (``LevelResult.breakdown['shape']``)."""

    input_tokens: list[int] = Field(
        min_length=1, max_length=MAX_SHAPES, description="prompt lengths, in order"
    )
    repeats: int = Field(default=8, ge=1, le=100_000, description="requests of each shape before the next")

    @model_validator(mode="after")
    def _positive(self) -> ShapeSweep:
        for n in self.input_tokens:
            if n < 1:
                raise ValueError(f"input_tokens must be >= 1, got {n}")
        return self


class Payload(_Strict):
    """What each request carries. Plain HTTP uses method/body/headers; LLM backends use the prompt fields."""

    method: Literal["GET", "POST", "PUT"] = "GET"
    body: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    prompt: str = "Hello"
    input_tokens: int = Field(default=0, ge=0)
    max_output_tokens: int = Field(default=16, ge=0)
    stream: bool = True
    workload: dict[str, Any] | None = Field(
        default=None, description="options of a registered workload source (key 'kind' selects it)"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="protocol-specific options")
    fixed_output_tokens: bool = Field(
        default=False,
        description="OpenAI backends: every answer is exactly its max_tokens long; the request also sends "
        "ignore_eos and min_tokens = max_tokens (vLLM's OpenAI server honours both), so an early end of "
        "sequence cannot shorten it",
    )
    classes: list[RequestClass] = Field(
        default_factory=list, max_length=MAX_CLASSES, description="request classes (weights, priorities)"
    )
    shape_sweep: ShapeSweep | None = Field(
        default=None, description="walk through prompt lengths on purpose (first hit per new shape)"
    )
    class_seed: int = Field(default=0, description="seed of the class each request is drawn into")
    images: ImageParts | None = Field(
        default=None, description="openai-chat: images as content parts of every request (or per class)"
    )
    image_tensor: ImageTensor | None = Field(
        default=None, description="triton backends: a V2 image tensor in every request (or per class)"
    )

    @model_validator(mode="after")
    def _distinct_classes(self) -> Payload:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"classes need distinct names, got {names}")
        if self.shape_sweep is not None and self.workload is not None:
            raise ValueError("give a workload or a shape_sweep, not both")
        if self.workload is not None and self.workload.get("kind") in ("synthetic", "dataset"):
            try:  # the built-in sources are checked here, so a bad one fails before any load
                TypeAdapter(Workload).validate_python(self.workload)
            except ValidationError as exc:
                raise ValueError(f"workload: {format_validation_error(exc)}") from exc
        return self


class StabilityRule(_Strict):
    """Stop a level early once the last ``windows`` windows agree within ``tolerance`` (relative)."""

    window_s: float = Field(default=1.0, gt=0)
    windows: int = Field(default=3, ge=2)
    tolerance: float = Field(default=0.05, gt=0, lt=1)
    metric: Literal["throughput", "mean_latency"] = "throughput"


class CircuitBreaker(_Strict):
    """Stop a level after too many failures, so a dead server does not burn the whole duration."""

    consecutive_errors: int | None = Field(default=None, ge=1)
    error_rate: float | None = Field(default=None, gt=0, le=1)
    window_s: float = Field(default=1.0, gt=0)
    min_requests: int = Field(default=20, ge=1, description="error rate is judged on at least this many")

    @model_validator(mode="after")
    def _some_rule(self) -> CircuitBreaker:
        if self.consecutive_errors is None and self.error_rate is None:
            raise ValueError("give 'consecutive_errors' and/or 'error_rate'")
        return self


class Retry(_Strict):
    """How the client retries a failed request, as the service's real clients might: the drill
    reproduces their retry behaviour on purpose (a storm is retries without backoff). A request
    is measured from its first attempt to its last; the attempts are counted in the run's notes."""

    attempts: int = Field(default=3, ge=1, le=20, description="attempts per request, the first included")
    backoff_ms: float = Field(
        default=0.0, ge=0, le=60_000, description="wait before the first retry, doubled for each next one"
    )
    max_backoff_ms: float = Field(default=10_000.0, gt=0, le=600_000, description="longest wait")
    jitter: bool = Field(default=False, description="full jitter: each wait drawn uniformly in [0, backoff]")
    statuses: list[int] = Field(
        default_factory=lambda: [429, 502, 503, 504],
        max_length=32,
        description="HTTP statuses that are retried (connection errors and time-outs always are)",
    )
    seed: int = Field(default=0, description="seed of the jitter draws")


class Observe(_Strict):
    """The server's side, read before and after each level (and sampled during it): the same
    grammar as ``mcp-bench run --server-metrics`` and ``--triton-stats``, so a plan (or an
    MCPBenchmark) can ask for what the diagnosis needs."""

    server_metrics: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="'triton', 'vllm' (the target's /metrics), 'triton=URL', 'vllm=URL' or a Prometheus URL",
    )
    triton_stats: list[str] = Field(
        default_factory=list, max_length=8, description="MODEL or MODEL=URL: Triton's statistics extension"
    )
    timeline_interval_s: float | None = Field(
        default=1.0,
        ge=0.05,
        le=60,
        description="also sample the servers' queue, cache and utilisation gauges this often during each "
        "level (None: only before and after)",
    )
    settle_s: float = Field(
        default=0.0,
        ge=0,
        le=600,
        description="after each level, this long with no load before the next, and memory read again at its "
        "end: the GPU-memory forensics tell memory a level borrowed from memory it kept (0: no wait)",
    )

    prometheus: str | None = Field(
        default=None, max_length=2048, description="Prometheus server the promql queries are read through"
    )
    promql: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="NAME=EXPR (a gauge) or NAME:counter=EXPR, read around each level; needs prometheus",
    )
    gpu_samplers: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="node-level NVML samplers' URLs (mcp-bench gpu-sampler): the serving GPUs, per level",
    )

    @property
    def empty(self) -> bool:
        return not (self.server_metrics or self.triton_stats or self.promql or self.gpu_samplers)


class Consistency(_Strict):
    """Output consistency under load (:mod:`mcp_bench.consistency`): ``probes`` fixed requests
    (seeded prompts or V2 tensors, deterministic decoding: temperature 0 and ``seed``) answered at
    rest before the first level, then again every ``interval_s`` during each level; each answer
    is compared with the probe's at-rest answer. A level whose answers drift past a threshold is
    a finding, whatever its latency."""

    probes: int = Field(default=4, ge=1, le=32, description="distinct probe requests, all sent each round")
    interval_s: float = Field(default=1.0, gt=0, le=600, description="seconds between a level's probe rounds")
    max_rounds: int = Field(default=32, ge=1, le=1000, description="probe rounds per level at most")
    rest_repeats: int = Field(
        default=2, ge=1, le=10, description="rounds at rest; their answers must agree, or no baseline"
    )
    max_tokens: int = Field(default=16, ge=1, le=4096, description="OpenAI: tokens each probe asks for")
    logprobs: bool = Field(default=True, description="OpenAI: ask for logprobs, compared where returned")
    seed: int = Field(default=0, description="seeds the probes' prompts or tensors, and the sampling seed")
    l2: Literal["relative", "absolute"] = Field(
        default="relative", description="L2 distance of numeric outputs: over the at-rest norm, or as is"
    )
    threshold_l2: float = Field(default=1e-3, ge=0, description="an answer farther than this is drift")
    threshold_mismatch: float = Field(
        default=0.0, ge=0, le=1, description="a level's share of differing tokens above this is drift"
    )


class ClientBound(_Strict):
    """When a level counts as limited by the client rather than the server: any worker process
    whose schedule lag P99 or CPU share of one core passed its bound (the figures then measure
    the load generator as much as the target)."""

    lag_p99_ms: float = Field(default=10.0, gt=0, description="open loop: a worker's schedule lag P99")
    cpu_share: float = Field(default=0.9, gt=0, description="a worker's CPU time / the level's wall time")


STREAMS_PER_WORKER = 128  # closed loop: requests in flight one client process serves well
RATE_PER_WORKER = 1500.0  # open loop: arrivals per second one client process sends on time


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def choose_workers(levels: Mapping[str, Any], engine: str = "builtin", cores: int | None = None) -> int:
    """``workers: auto``: enough client processes that none runs near a full core (512 streams in
    one process measured the client: TTFT +23 ms at P50), at most half the cores this runs on
    (the rest for the event loops' own peaks and whatever shares the host). One for other
    engines, which own their processes."""
    if engine != "builtin":
        return 1
    concurrency = max(levels.get("concurrency") or [0])
    rate = max(levels.get("rate") or [0.0])
    wanted = max(math.ceil(concurrency / STREAMS_PER_WORKER), math.ceil(rate / RATE_PER_WORKER), 1)
    return max(1, min(wanted, (usable_cores() if cores is None else cores) // 2, 256))


def mix_problem(plan: RunPlan) -> str | None:
    """A mix names each class's backend, and only a mix does (a class's backend elsewhere would
    be silently ignored)."""
    classes = plan.payload.classes
    if plan.backend == "mix":
        if not classes:
            return "backend 'mix' needs payload.classes, each naming its backend"
        missing = [c.name for c in classes if c.backend is None]
        if missing:
            return f"backend 'mix': payload.classes {missing} name no backend"
        if plan.engine != "builtin":
            return f"backend 'mix' needs the builtin engine, not {plan.engine!r}"
        return None
    named = [c.name for c in classes if c.backend is not None or c.path is not None or c.model is not None]
    if named:
        return f"payload.classes {named} set backend, path or model, which only backend 'mix' reads"
    return None


class RunPlan(_Strict):
    """One benchmark run: a target, a load model swept over levels, stages, SLOs and payload."""

    url: str = Field(min_length=1)
    backend: Backend = "http"
    model: str = ""
    engine: str = "builtin"
    levels: Levels
    stage: Stage
    request_timeout_s: float = Field(default=30.0, gt=0)
    http_client: Literal["fast", "aiohttp"] = Field(
        default="fast",
        description="http, openai and openai-chat backends: the lean keep-alive client or aiohttp",
    )
    slo: Slo = Field(default_factory=Slo)
    payload: Payload = Field(default_factory=Payload)
    stability: StabilityRule | None = None
    breaker: CircuitBreaker | None = None
    labels: dict[str, str] = Field(default_factory=dict, description="free-form tags copied into results")
    observe: Observe = Field(default_factory=Observe, description="server-side metrics to collect")
    retry: Retry | None = Field(default=None, description="client retries (none by default)")
    workers: int = Field(
        default=1,
        ge=1,
        le=256,
        description="builtin engine: client processes (one event loop each) sharing each level's load; "
        "'auto' chooses from the largest level and the cores here (choose_workers)",
    )
    client_bound: ClientBound = Field(
        default_factory=ClientBound, description="with workers > 1: when a level is flagged client-bound"
    )
    search: SearchSpec | None = Field(
        default=None,
        description="saturation search: the levels are chosen as it goes, from the one level given",
    )
    consistency: Consistency | None = Field(
        default=None, description="probe requests compared at rest and under load (none by default)"
    )

    @model_validator(mode="before")
    @classmethod
    def _auto_workers(cls, data: Any) -> Any:
        """``workers: auto`` is resolved where the plan is read, on the host that runs it."""
        if isinstance(data, Mapping) and data.get("workers") == "auto":
            levels = data.get("levels")
            chosen = choose_workers(
                levels if isinstance(levels, Mapping) else {}, str(data.get("engine", "builtin"))
            )
            return {**data, "workers": chosen}
        return data

    @model_validator(mode="after")
    def _url_scheme(self) -> RunPlan:
        if self.workers > 1 and self.engine != "builtin":
            raise ValueError(f"workers > 1 needs the builtin engine, not {self.engine!r}")
        if self.backend != "triton-grpc" and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// for backend {self.backend!r}")
        p = self.payload
        if (problem := mix_problem(self)) is not None:
            raise ValueError(problem)
        if self.backend != "mix" and (problem := media_problem(self.backend, p.images, p.image_tensor)):
            raise ValueError(f"payload: {problem}")
        for c in p.classes:
            backend = c.backend or self.backend
            if (problem := media_problem(backend, c.images, c.image_tensor)) is not None:
                raise ValueError(f"payload.classes.{c.name}: {problem}")
        if self.consistency is not None and self.backend == "http":
            raise ValueError("consistency needs an openai, openai-chat or triton backend: answers to compare")
        if self.search is not None and (problem := search_problem(self)) is not None:
            raise ValueError(f"search: {problem}")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunPlan:
        """Load and validate a plan file; errors name the file and the field path."""
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PlanError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise PlanError(f"{path}: a plan is a mapping, got {type(data).__name__}")
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "plan") -> RunPlan:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise PlanError(f"{source}: {format_validation_error(exc)}") from exc

    def shown(self) -> RunPlan:
        """The plan as it may leave the run (a result document, a report, status): every URL and
        path with its query values, matrix parameter values and fragment redacted, wherever it
        sits (target, classes, observe sources, image bases), and every header's value hidden;
        what the run dials stays in the run's own Secret."""
        return RunPlan.model_validate(_shown(self.model_dump(mode="json")))

    @property
    def max_connections(self) -> int:
        """Connection pool size the protocol client needs for the largest level."""
        if self.levels.concurrency is not None:
            if self.search is not None:
                return int(self.search.ceiling)
            return max(self.levels.concurrency)
        return self.levels.max_concurrency

    @property
    def planned_levels(self) -> int:
        """Levels the run has at most: a search's probe budget, else the levels given."""
        return self.search.max_probes if self.search is not None else self.levels.count


def _shown(value: Any, key: str = "") -> Any:
    if key == "headers" and isinstance(value, dict):
        return {name: REDACTED for name in value}
    if isinstance(value, dict):
        return {k: _shown(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v, key) for v in value]
    if isinstance(value, str) and key in _URL_KEYS:
        return redact_url(value)
    return redact_text(value) if isinstance(value, str) else value


# the plan's fields that hold one URL or path (the rest are judged as free text: an observe
# entry is 'vllm=URL')
_URL_KEYS = frozenset({"url", "url_base", "path", "prometheus"})


def search_problem(plan: RunPlan) -> str | None:
    """Why the plan's search cannot run, or None: it starts from one level inside its bounds,
    judges an SLO that a higher load can miss, and probes whole concurrencies."""
    search, lv = plan.search, plan.levels
    assert search is not None
    values = lv.rate if lv.rate is not None else lv.concurrency or []
    if len(values) != 1:
        return f"give exactly one level, the first probe (got {len(values)})"
    if not search.floor <= values[0] <= search.ceiling:
        return (
            f"the first probe {values[0]:g} is outside floor..ceiling, {search.floor:g}..{search.ceiling:g}"
        )
    if plan.slo.empty:
        return "a search needs an SLO to meet (a latency, TTFT, TPOT or error-rate objective)"
    if plan.slo.throughput_rps is not None:
        return "slo.throughput_rps would fail the low probes: the search finds the throughput itself"
    if not lv.open_loop and not (float(search.floor).is_integer() and float(search.ceiling).is_integer()):
        return "over concurrency, floor and ceiling are whole numbers"
    return None


class PlanError(ValueError):
    """A plan that cannot run; the message names the field path."""


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem, ``a.b.0: message``, so users find the field at once."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        lines.append(f"{loc}: {err['msg']}")
    return "; ".join(lines)
