"""How the load runs: its levels, each level's stage, the SLOs it is judged by, and the rules
that end a level early, retry a request or flag the client as the limit."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mcp_bench.plan.base import Strict

Backend = Literal["http", "openai", "openai-chat", "triton-http", "triton-grpc", "mix"]
# "mix": every request class names its own backend (a traffic mix: health checks, V2 inference and
# chat streaming against one service, each class measured on its own)
ClassBackend = Literal["http", "openai", "openai-chat", "triton-http", "triton-grpc"]
Arrival = Literal["constant", "poisson", "gamma"]
Overload = Literal["late", "drop"]
Connections = Literal["warm", "cold", "per-request"]


class Levels(Strict):
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
        default=0,  # as MCPBenchmark's CRD shows it; validated to 0.0
        validate_default=True,
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


class Stage(Strict):
    """How long each level runs: warm-up (not measured), then a duration and/or a request count."""

    warmup_s: float = Field(default=0, ge=0, validate_default=True)  # 0.0, shown as 0 in the CRD
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


class Slo(Strict):
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


class StabilityRule(Strict):
    """Stop a level early once the last ``windows`` windows agree within ``tolerance`` (relative)."""

    window_s: float = Field(default=1.0, gt=0)
    windows: int = Field(default=3, ge=2)
    tolerance: float = Field(default=0.05, gt=0, lt=1)
    metric: Literal["throughput", "mean_latency"] = "throughput"


class CircuitBreaker(Strict):
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


class Retry(Strict):
    """How the client retries a failed request, as the service's real clients might: the drill
    reproduces their retry behaviour on purpose (a storm is retries without backoff). A request
    is measured from its first attempt to its last; the attempts are counted in the run's notes."""

    attempts: int = Field(default=3, ge=1, le=20, description="attempts per request, the first included")
    backoff_ms: float = Field(  # 0.0 and 10000.0, shown as 0 and 10000 in the CRD
        default=0,
        ge=0,
        le=60_000,
        validate_default=True,
        description="wait before the first retry, doubled for each next one",
    )
    max_backoff_ms: float = Field(
        default=10_000, gt=0, le=600_000, validate_default=True, description="longest wait"
    )
    jitter: bool = Field(default=False, description="full jitter: each wait drawn uniformly in [0, backoff]")
    statuses: list[int] = Field(
        default_factory=lambda: [429, 502, 503, 504],
        max_length=32,
        description="HTTP statuses that are retried (connection errors and time-outs always are)",
    )
    seed: int = Field(default=0, description="seed of the jitter draws")


class ClientBound(Strict):
    """When a level counts as limited by the client rather than the server: any worker process
    whose schedule lag P99 or CPU share of one core passed its bound (the figures then measure
    the load generator as much as the target)."""

    lag_p99_ms: float = Field(default=10.0, gt=0, description="open loop: a worker's schedule lag P99")
    cpu_share: float = Field(default=0.9, gt=0, description="a worker's CPU time / the level's wall time")
