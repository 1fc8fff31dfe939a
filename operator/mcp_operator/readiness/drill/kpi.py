"""The KPI board: what the drill measured against the reference limits, one row per KPI with
✅ / ⚠️ / ❌ and the evidence. Pure: measurements in, rows out. A KPI with no data is
Inconclusive (no mark), never a pass."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_checks.verdict import CheckOutcome, Finding, Verdict

from ...api.drill import KpiThresholds
from .load import StageFigures

MARKS = {
    Verdict.PASS: "✅",
    Verdict.WARN: "⚠️",
    Verdict.FAIL: "❌",
    Verdict.INCONCLUSIVE: "?",
    Verdict.ERROR: "?",
}


@dataclass(frozen=True)
class KpiResult:
    name: str
    verdict: Verdict
    reason: str
    measured: str
    threshold: str
    warn: str = ""
    evidence: str = ""

    def to_wire(self) -> dict[str, str]:
        return {
            "name": self.name,
            "verdict": self.verdict.value,
            "mark": MARKS[self.verdict],
            "measured": self.measured,
            "threshold": self.threshold,
            "warn": self.warn,
            "evidence": self.evidence,
        }

    def outcome(self) -> CheckOutcome:
        return CheckOutcome(
            f"kpi:{self.name}",
            self.verdict,
            self.reason,
            f"{self.measured} against {self.threshold}" + (f" ({self.evidence})" if self.evidence else ""),
            {"measured": self.measured},
            {"limit": self.threshold, **({"warn": self.warn} if self.warn else {})},
        )


@dataclass(frozen=True)
class FaultTiming:
    fault_id: str
    stage: str
    kind: str
    recovery_s: float | None  # None: never recovered within the record
    outage: bool  # whether clients saw any failure after it


def success_kpi(ok: int, total: int, t: KpiThresholds) -> KpiResult:
    threshold = f">= {t.health_success_ratio:.4%}"
    warn = "" if t.health_success_ratio_warn is None else f"< {t.health_success_ratio_warn:.4%}"
    if total == 0:
        return KpiResult(
            "healthSuccessRatio", Verdict.INCONCLUSIVE, "NoSamples", "no requests", threshold, warn
        )
    ratio = ok / total
    measured = f"{ratio:.4%} of {total}"
    needed = math.ceil(round(1.0 / (1.0 - t.health_success_ratio), 6)) if t.health_success_ratio < 1 else 1
    if ratio < t.health_success_ratio:
        return KpiResult(
            "healthSuccessRatio", Verdict.FAIL, "HealthBelowThreshold", measured, threshold, warn
        )
    if total < needed:
        return KpiResult(
            "healthSuccessRatio",
            Verdict.INCONCLUSIVE,
            "InsufficientSamples",
            f"{measured}; {needed} are needed to verify the limit",
            threshold,
            warn,
        )
    if t.health_success_ratio_warn is not None and ratio < t.health_success_ratio_warn:
        return KpiResult("healthSuccessRatio", Verdict.WARN, "HealthNearThreshold", measured, threshold, warn)
    return KpiResult("healthSuccessRatio", Verdict.PASS, "HealthMet", measured, threshold, warn)


def seconds_kpi(
    name: str, values: Sequence[tuple[str, float | None]], limit: float, warn: float | None, never: str
) -> KpiResult | None:
    if not values:
        return None
    threshold, warn_text = f"<= {limit:g} s", ("" if warn is None else f"> {warn:g} s")
    missing = [evidence for evidence, v in values if v is None]
    if missing:
        return KpiResult(
            name, Verdict.FAIL, never, "never, within the drill", threshold, warn_text, missing[0]
        )
    evidence, worst = max(((e, v) for e, v in values if v is not None), key=lambda ev: ev[1])
    measured = f"{worst:.2f} s"
    if worst > limit:
        return KpiResult(name, Verdict.FAIL, "AboveThreshold", measured, threshold, warn_text, evidence)
    if warn is not None and worst > warn:
        return KpiResult(name, Verdict.WARN, "NearThreshold", measured, threshold, warn_text, evidence)
    return KpiResult(name, Verdict.PASS, "WithinThreshold", measured, threshold, warn_text, evidence)


def recovery_kpi(timings: Sequence[FaultTiming], t: KpiThresholds) -> KpiResult | None:
    values = [(f"{f.kind} {f.fault_id} in {f.stage}", f.recovery_s) for f in timings]
    return seconds_kpi(
        "recoverySeconds", values, t.recovery_seconds, t.recovery_seconds_warn, "NeverRecovered"
    )


def hot_update_kpi(updates: Sequence[tuple[str, float | None]], t: KpiThresholds) -> KpiResult | None:
    return seconds_kpi(
        "hotUpdateSeconds", updates, t.hot_update_seconds, t.hot_update_seconds_warn, "NotRolledOut"
    )


def jump_point(
    stages: Sequence[tuple[str, StageFigures]], factor: float
) -> tuple[str, float, float, float] | None:
    """The first (stage, offset, window P99, previous stage P99) where a window's P99 rose past
    ``factor`` times the previous stage's P99."""
    previous: float | None = None
    for name, figures in stages:
        if previous is not None and previous > 0:
            for window in figures.windows:
                if window.p99_ms is not None and window.p99_ms > factor * previous:
                    return name, window.offset_s, window.p99_ms, previous
        if figures.p99_ms is not None:
            previous = figures.p99_ms
    return None


def jump_kpi(stages: Sequence[tuple[str, StageFigures]], t: KpiThresholds) -> KpiResult | None:
    """Where P99 jumps is a finding to look at (⚠️), not a failure by itself."""
    loaded = [(n, f) for n, f in stages if f.completed]
    if len(loaded) < 2:
        return None
    threshold = f"P99 <= {t.p99_jump_factor:g}x the previous stage's"
    jump = jump_point(loaded, t.p99_jump_factor)
    if jump is None:
        return KpiResult("p99JumpPoint", Verdict.PASS, "NoJump", "no jump", threshold)
    stage, offset, p99, before = jump
    return KpiResult(
        "p99JumpPoint",
        Verdict.WARN,
        "P99Jumped",
        f"{stage} at {offset:.1f} s: P99 {p99:.2f} ms vs {before:.2f} ms ({p99 / before:.1f}x)",
        threshold,
        evidence=f"stage {stage}",
    )


def board(
    *,
    ok: int,
    total: int,
    stages: Sequence[tuple[str, StageFigures]],
    recoveries: Sequence[FaultTiming],
    hot_updates: Sequence[tuple[str, float | None]],
    thresholds: KpiThresholds,
    extra: Sequence[KpiResult] = (),
) -> list[KpiResult]:
    """Every KPI with data, in a fixed order; ``extra`` are the rows measured by other modules
    (retry amplification, autoscaler lag, write outage)."""
    rows = [success_kpi(ok, total, thresholds)]
    for row in (
        recovery_kpi(recoveries, thresholds),
        hot_update_kpi(hot_updates, thresholds),
        jump_kpi(stages, thresholds),
    ):
        if row is not None:
            rows.append(row)
    return rows + list(extra)


def refused_outcome(fault_id: str, reason: str, message: str) -> CheckOutcome:
    """A fault that could not be injected: nothing was verified by it, so the run cannot pass."""
    return CheckOutcome(
        f"fault:{fault_id}",
        Verdict.ERROR,
        reason,
        message,
        findings=[Finding(fault_id, Verdict.ERROR, reason, message)],
    )
