"""spec.load of an MCPBenchmark: the levels swept, how each one runs and ends, the engine that
sends it, and spec.slo, which judges every level. Defaults the run plan shares are the plan's own
(``mcp_bench.plan``), read from its models."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcp_bench.models import Arrival, Connections, Levels, Overload, RunPlan, Stage

from .common import ApiModel, cel, with_rules
from .engine import engine_default
from .search import SEARCH_RULES, BenchmarkSearch

MAX_LEVELS = 16  # of spec.load.concurrency and spec.load.rate


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
        default=engine_default(Levels, "arrival"),
        description="Open-loop arrival process.",
    )
    duration_seconds: float | None = Field(
        default=None, gt=0, le=86400, description="Measured time per level."
    )
    requests: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Requests per level and shard."
    )
    warmup_seconds: float = Field(
        default=engine_default(Stage, "warmup_s"), ge=0, le=3600, description="Unmeasured warm-up per level."
    )
    request_timeout_seconds: float = Field(
        default=engine_default(RunPlan, "request_timeout_s"),
        gt=0,
        le=3600,
        description="Per-request timeout.",
    )
    overload: Overload = Field(
        default=engine_default(Levels, "overload"),
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
        default=engine_default(Levels, "ramp_s"),
        ge=0,
        le=3600,
        description="Closed loop: workers start spread over this time; open loop: the rate rises linearly "
        "from 0 over it (builtin engine only).",
    )
    engine: Literal["builtin", "locust", "k6"] = Field(
        default=engine_default(RunPlan, "engine"),
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
