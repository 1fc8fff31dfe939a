"""The run plan itself: a target, a load swept over levels, and the sections it is built from,
checked together (backend and media, a mix's classes, a search's start) before any traffic."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from mcp_bench.multimodal import media_problem
from mcp_bench.plan.base import PlanError, Strict, format_validation_error
from mcp_bench.plan.levels import (
    Backend,
    CircuitBreaker,
    ClientBound,
    Levels,
    Retry,
    Slo,
    StabilityRule,
    Stage,
)
from mcp_bench.plan.observe import Consistency, Observe
from mcp_bench.plan.payload import Payload
from mcp_bench.saturation import SearchSpec
from mcp_common.redact import REDACTED, redact_text, redact_url

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


class RunPlan(Strict):
    """One benchmark run: a target, a load model swept over levels, stages, SLOs and payload."""

    url: str = Field(min_length=1)
    backend: Backend = "http"
    model: str = ""
    engine: str = "builtin"
    levels: Levels
    stage: Stage
    request_timeout_s: float = Field(default=30, gt=0, validate_default=True)  # 30.0, 30 in the CRD
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
