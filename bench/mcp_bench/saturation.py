"""What a plan asks of a saturation search, and what the result document records of one.

Both the plan and the result document read these shapes, and the search package above them runs
them, so they sit at the bottom of ``mcp_bench``'s layers. ``SearchSpec`` is also MCPBenchmark's
spec.load.search (the operator's model subclasses it): its descriptions are ``kubectl explain``'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_bench.specmodel import SpecModel

SearchStop = Literal["converged", "budget_exhausted", "slo_never_met", "ceiling_reached"]
SearchOver = Literal["rate", "concurrency"]
MAX_PROBES = 32  # every probe is a level, and a status keeps at most 32 rows
MAX_LOAD = 1_000_000  # requests/s or concurrency: the highest bound a search may have


class SearchSpec(SpecModel):
    """Bracket, then bisect, between ``floor`` and ``ceiling``. The first probe is the plan's one
    level (``levels.rate`` or ``levels.concurrency``); the bracket multiplies (or divides) by
    ``factor`` until the SLO is missed (or met), bisection halves the bracket until its width is at
    most ``tolerance`` of the load that met the SLO, and no search runs more than ``max_probes``."""

    floor: float = Field(
        gt=0,
        le=MAX_LOAD,
        description="Lowest load to try; missed there, the search ends (SloNeverMet).",
    )
    ceiling: float = Field(
        gt=0,
        le=MAX_LOAD,
        description="Highest load to try; met there, the search ends (CeilingReached).",
    )
    factor: float = Field(default=2.0, gt=1, le=10, description="Bracket step: load times or over this.")
    tolerance: float = Field(
        default=0.05,
        ge=0.001,
        le=0.5,
        description="Converged once the lowest load missed is within this share above the highest met.",
    )
    max_probes: int = Field(
        default=8, ge=2, le=MAX_PROBES, description="Levels run at most (each one a status row)."
    )
    knee_efficiency: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="Knee: a higher load's throughput grew by less than this share of its load step...",
    )
    knee_latency_rise: float = Field(
        default=0.2, gt=0, le=100, description="...while mean latency rose by more than this share."
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
