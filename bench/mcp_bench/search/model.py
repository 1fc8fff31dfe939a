"""What a plan asks of a saturation search, and what the result document records of one."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SearchStop = Literal["converged", "budget_exhausted", "slo_never_met", "ceiling_reached"]
SearchOver = Literal["rate", "concurrency"]
MAX_PROBES = 32  # every probe is a level, and a status keeps at most 32 rows


class SearchSpec(BaseModel):
    """Bracket, then bisect, between ``floor`` and ``ceiling``. The first probe is the plan's one
    level (``levels.rate`` or ``levels.concurrency``); the bracket multiplies (or divides) by
    ``factor`` until the SLO is missed (or met), bisection halves the bracket until its width is at
    most ``tolerance`` of the load that met the SLO, and no search runs more than ``max_probes``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    floor: float = Field(gt=0, description="lowest load to try: missed there, the SLO is never met")
    ceiling: float = Field(gt=0, description="highest load to try: met there, the search stops")
    factor: float = Field(default=2.0, gt=1, le=10, description="bracket step: load multiplied or divided")
    tolerance: float = Field(
        default=0.05, ge=0.001, le=0.5, description="converged once (missed - met) <= tolerance x met"
    )
    max_probes: int = Field(default=8, ge=2, le=MAX_PROBES, description="levels run at most")
    knee_efficiency: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="knee: a higher load's throughput grew by less than this share of its load step...",
    )
    knee_latency_rise: float = Field(
        default=0.2, gt=0, le=100, description="...while mean latency rose by more than this (relative)"
    )

    @model_validator(mode="after")
    def _ordered(self) -> SearchSpec:
        if self.floor > self.ceiling:
            raise ValueError(f"floor {self.floor:g} is above ceiling {self.ceiling:g}")
        return self


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchProbe(_Record):
    """One level the search ran: its load, why it was chosen and what it measured."""

    level: int = Field(description="index of the level in the document")
    load: float
    step: str = Field(description="start, bracket-up, bracket-down or bisect")
    passed: bool = Field(description="every SLO met at this load")
    throughput_rps: float | None = None
    goodput_rps: float | None = None
    latency_mean_ms: float | None = None
    latency_p99_ms: float | None = None


class Knee(_Record):
    """Where throughput stopped growing with load while latency climbed: the lowest load on the
    throughput plateau, and the higher load that shows it (throughput flat, latency up)."""

    load: float
    next_load: float
    throughput_rps: float
    next_throughput_rps: float
    latency_mean_ms: float
    next_latency_mean_ms: float


class SearchOutcome(_Record):
    """The answer (the highest load that met the SLO), the knee, every probe, and why it stopped."""

    over: SearchOver
    probes: list[SearchProbe] = Field(default_factory=list)
    max_goodput_load: float | None = Field(default=None, description="highest load that met the SLO")
    max_goodput_rps: float | None = Field(default=None, description="goodput measured at that load")
    lowest_failing_load: float | None = Field(default=None, description="lowest load that missed it")
    knee: Knee | None = None
    knee_note: str = ""
    stop_reason: SearchStop
    message: str

    @property
    def found(self) -> bool:
        return self.max_goodput_load is not None
