"""The KPI board: what the drill measured against the reference limits, one row per KPI with
✓ / ! / ✗ and the evidence. Pure: measurements in, rows out. A KPI with no data is
Inconclusive (no mark), never a pass."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mcp_checks.api import CheckOutcome, Finding, Verdict

from ...api.drill import KpiThresholds
from ...board.marks import mark
from .load import StageFigures, WindowFigures

NO_OUTAGE = "NoOutageObserved"  # a fault no client saw fail: no recovery to measure
NOT_MEASURED = "not measured: the fault caused no observable failure, so there was no recovery to time"


@dataclass(frozen=True)
class KpiResult:
    name: str
    verdict: Verdict
    reason: str
    measured: str
    threshold: str
    warn: str = ""
    evidence: str = ""
    fault: str = ""  # the fault a per-fault row (recoverySeconds) judges

    def to_wire(self) -> dict[str, str]:
        return {
            "name": self.name,
            **({"fault": self.fault} if self.fault else {}),
            "verdict": self.verdict.value,
            "mark": mark(self.verdict),
            "measured": self.measured,
            "threshold": self.threshold,
            "warn": self.warn,
            "evidence": self.evidence,
        }

    def outcome(self) -> CheckOutcome:
        return CheckOutcome(
            f"kpi:{self.name}" + (f":{self.fault}" if self.fault else ""),
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


def recovery_kpi(f: FaultTiming, t: KpiThresholds) -> KpiResult:
    """A fault's recovery against the limit. A fault after which no client saw a failure did not
    bite: there was no outage to recover from, so nothing was measured (Inconclusive
    ``NoOutageObserved``), never a Pass of 0 s."""
    evidence = f"{f.kind} {f.fault_id} in {f.stage}"
    row = seconds_kpi(
        "recoverySeconds",
        [(evidence, f.recovery_s)],
        t.recovery_seconds,
        t.recovery_seconds_warn,
        "NeverRecovered",
    )
    assert row is not None  # one value given, one row back
    if not f.outage:
        row = replace(row, verdict=Verdict.INCONCLUSIVE, reason=NO_OUTAGE, measured=NOT_MEASURED)
    return replace(row, fault=f.fault_id)


def recovery_kpis(timings: Sequence[FaultTiming], t: KpiThresholds) -> list[KpiResult]:
    """One row per fault: a pod kill and a zone outage each get their own figure and verdict."""
    return [recovery_kpi(f, t) for f in timings]


def hot_update_kpis(updates: Sequence[tuple[str, str, float | None]], t: KpiThresholds) -> list[KpiResult]:
    """One row per hot update, (fault id, what it was, seconds): a rollout and an in-place reload
    each get their own figure and verdict, their evidence naming which."""
    rows = []
    for fault_id, evidence, seconds in updates:
        row = seconds_kpi(
            "hotUpdateSeconds",
            [(evidence, seconds)],
            t.hot_update_seconds,
            t.hot_update_seconds_warn,
            "NotRolledOut",
        )
        assert row is not None  # one value given, one row back
        rows.append(replace(row, fault=fault_id))
    return rows


FAILING_SHARE = 0.01  # above this share of failed requests, a window's P99 request is a failure
# a P99 of fewer requests is one of the slowest few of them: one late request, not a percentile
P99_MIN_REQUESTS = 100
ARRIVAL_NOISE_SD = 3.0  # Poisson arrivals: a stage this many standard deviations short was short


@dataclass(frozen=True)
class Jump:
    """A stage's first window whose P99 rose past the factor, or whose P99 request failed.
    ``client_busy``: that window's client passed its bound and even the latency from the actual
    send rose past the factor, so the jump may be the client's as much as the service's."""

    stage: str
    offset_s: float
    p99_ms: float | None  # None: over 1 % of the window's requests failed (however fast)
    baseline_ms: float
    errors: int
    requests: int
    client_busy: bool = False

    def describe(self) -> str:
        where = f"{self.stage} at {self.offset_s:.1f} s"
        if self.p99_ms is None:
            return (
                f"{where}: {self.errors} of {self.requests} requests failed, so P99 is a failure "
                f"(vs {self.baseline_ms:.2f} ms)"
            )
        errors = f", {self.errors} failed" if self.errors else ""
        ratio = self.p99_ms / self.baseline_ms
        return f"{where}: P99 {self.p99_ms:.2f} ms vs {self.baseline_ms:.2f} ms ({ratio:.1f}x){errors}"


def _judged_windows(figures: StageFigures) -> list[WindowFigures]:
    """The stage's windows as P99s are judged: each window that holds enough requests to have a
    P99 of its own; where none does, the whole stage as one window."""
    resolved = [w for w in figures.windows if w.requests >= P99_MIN_REQUESTS]
    if resolved or not figures.windows:
        return resolved
    if figures.requests < P99_MIN_REQUESTS:
        return []
    busy = any(w.client_busy for w in figures.windows)
    return [
        WindowFigures(
            0.0,
            figures.p99_ms,
            figures.completed,
            figures.errors,
            service_p99_ms=figures.service_p99_ms,
            client_busy=busy,
        )
    ]


def _rise(window: WindowFigures, limit: float) -> bool | None:
    """None when the window's P99 stayed within ``limit``; else whether the rise may be the
    client's. A busy client's lateness adds to the latency from the schedule, so a busy window
    is judged on the latency from the actual send too (which a busy client can only make slower,
    never faster): within the limit there, the rise was the client's alone, and no rise."""
    if window.p99_ms is None or window.p99_ms <= limit:
        return None
    if not window.client_busy:
        return False
    if window.service_p99_ms is not None and window.service_p99_ms <= limit:
        return None
    return True


def _jump_in(name: str, figures: StageFigures, baseline: float, factor: float) -> Jump | None:
    judged = {w.offset_s: w for w in _judged_windows(figures)}
    for window in figures.windows:
        requests = window.requests
        if requests > 0 and window.errors / requests > FAILING_SHARE:
            return Jump(name, window.offset_s, None, baseline, window.errors, requests)
        seen = judged.get(window.offset_s)
        busy = None if seen is None else _rise(seen, factor * baseline)
        if seen is not None and busy is not None:
            return Jump(name, window.offset_s, seen.p99_ms, baseline, seen.errors, seen.requests, busy)
    return None


def _baseline_of(figures: StageFigures) -> float | None:
    """A calm stage's P99 as the next stages' baseline: only one with enough requests for a P99."""
    if figures.requests < P99_MIN_REQUESTS:
        return None
    return figures.p99_ms


def jump_points(stages: Sequence[tuple[str, StageFigures]], factor: float) -> list[Jump]:
    """Every stage's jump, judged against the last calm stage's P99 (a stage that jumped is no
    baseline for the next: a spike after a jumped mixed stage is still judged). Failures count:
    an outage whose failures come back fast is a jump, not "no jump"."""
    baseline: float | None = None
    jumps = []
    for name, figures in stages:
        jump = None if baseline is None or baseline <= 0 else _jump_in(name, figures, baseline, factor)
        if jump is not None:
            jumps.append(jump)
        elif (calm := _baseline_of(figures)) is not None:
            baseline = calm
    return jumps


def unjudged_stages(stages: Sequence[tuple[str, StageFigures]]) -> list[str]:
    """Stages whose P99 nothing judged: too few requests for a P99 (a first stage of too few
    leaves the next without a baseline, and so on)."""
    first = next((i for i, (_, f) in enumerate(stages) if _baseline_of(f) is not None), len(stages))
    return [n for i, (n, f) in enumerate(stages) if not _judged_windows(f) or 0 < i <= first]


def loaded_stages(stages: Sequence[tuple[str, StageFigures]]) -> list[tuple[str, StageFigures]]:
    """The stages that sent anything: the ones a P99 or a jump can be read from."""
    return [(n, f) for n, f in stages if f.completed or f.errors]


def jump_kpi(stages: Sequence[tuple[str, StageFigures]], t: KpiThresholds) -> KpiResult | None:
    """Where P99 jumps is a finding to look at (! Warn), not a failure by itself; every stage's jump
    is listed, the first one first. No jump is a finding only where every stage had requests
    enough for a P99: otherwise the row is Inconclusive and names the stages too small."""
    loaded = loaded_stages(stages)
    if len(loaded) < 2:
        return None
    threshold = f"P99 <= {t.p99_jump_factor:g}x the last calm stage's, failures <= {FAILING_SHARE:.0%}"
    jumps = jump_points(loaded, t.p99_jump_factor)
    if jumps:
        return KpiResult(
            "p99JumpPoint",
            Verdict.WARN,
            "P99Jumped",
            "; ".join(j.describe() for j in jumps),
            threshold,
            evidence="stages " + ", ".join(j.stage for j in jumps),
        )
    small = unjudged_stages(loaded)
    if small:
        counts = {n: f.requests for n, f in loaded}
        return KpiResult(
            "p99JumpPoint",
            Verdict.INCONCLUSIVE,
            "TooFewRequests",
            "; ".join(f"{n}: {counts[n]} requests" for n in small)
            + f": a P99 needs {P99_MIN_REQUESTS} (raise the stage's rate or time: spec.drill.durationScale)",
            threshold,
            evidence="stages " + ", ".join(small),
        )
    return KpiResult("p99JumpPoint", Verdict.PASS, "NoJump", "no jump", threshold)


def shortfall(figures: StageFigures) -> str | None:
    """Open loop: the stage sent fewer requests than its Poisson arrivals allow (more than
    ``ARRIVAL_NOISE_SD`` standard deviations short of rate x time), so the service never had the
    planned load; None when it had it, or the stage is closed loop."""
    planned = figures.planned_requests
    if planned is None:
        return None
    sent = figures.requests
    if sent >= planned - ARRIVAL_NOISE_SD * math.sqrt(planned):
        return None
    return f"sent {sent} of {planned:.0f} planned ({sent / planned:.0%})"


def load_generator_kpi(stages: Sequence[tuple[str, StageFigures]], factor: float) -> KpiResult | None:
    """Whether the load generator delivered the planned load and whether any finding may be its
    own doing. A busy client (its process near a full core, or late on its schedule) can only make
    the service look slower, never faster: where the stage still got its load and no jump rests on
    the busy client (busy windows are judged on the latency from the actual send), every finding
    stands and the row passes, saying the client was busy. A stage that did not get its load, or a
    jump that may be the client's, makes the row Inconclusive (never blamed on the service).
    Dropped arrivals never reached the service: counted here, not as failures."""
    if not stages:
        return None
    threshold = "the planned load sent (within arrival noise); no finding resting on a busy client"
    dropped = sum(f.dropped for _, f in stages)
    drops = f"; {dropped} arrivals dropped by the client's in-flight cap" if dropped else ""
    short = [(n, gap) for n, f in stages if (gap := shortfall(f)) is not None]
    if short:
        return KpiResult(
            "loadGenerator",
            Verdict.INCONCLUSIVE,
            "LoadNotDelivered",
            "; ".join(f"{n}: {gap}" for n, gap in short) + drops,
            threshold,
            evidence="stages " + ", ".join(n for n, _ in short),
        )
    loaded = loaded_stages(stages)
    suspect = {j.stage for j in jump_points(loaded, factor) if j.client_busy}
    bound = [(n, f.client_bound) for n, f in stages if f.client_bound]
    shown = [(n, reasons) for n, reasons in bound if n in suspect or not suspect]
    measured = "; ".join(f"{n}: {', '.join(reasons[:2])}" for n, reasons in shown)
    if suspect:
        return KpiResult(
            "loadGenerator",
            Verdict.INCONCLUSIVE,
            "LoadGeneratorSaturated",
            measured + "; the P99 jump there may be the client's" + drops,
            threshold,
            evidence="stages " + ", ".join(n for n, _ in bound if n in suspect),
        )
    if bound:
        return KpiResult(
            "loadGenerator",
            Verdict.PASS,
            "ClientBusyFindingsStand",
            measured + "; judged on the latency from the actual send, no finding rests on it" + drops,
            threshold,
            evidence="stages " + ", ".join(n for n, _ in bound),
        )
    return KpiResult(
        "loadGenerator", Verdict.PASS, "ClientKeptUp", f"{len(stages)} stages kept up{drops}", threshold
    )


def board(
    *,
    ok: int,
    total: int,
    stages: Sequence[tuple[str, StageFigures]],
    recoveries: Sequence[FaultTiming],
    hot_updates: Sequence[tuple[str, str, float | None]],
    thresholds: KpiThresholds,
    extra: Sequence[KpiResult] = (),
) -> list[KpiResult]:
    """Every KPI with data, in a fixed order; ``extra`` are the rows measured by other modules
    (retry amplification, autoscaler lag, write outage)."""
    rows = [
        success_kpi(ok, total, thresholds),
        *recovery_kpis(recoveries, thresholds),
        *hot_update_kpis(hot_updates, thresholds),
    ]
    for row in (
        jump_kpi(stages, thresholds),
        load_generator_kpi(stages, thresholds.p99_jump_factor),
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
