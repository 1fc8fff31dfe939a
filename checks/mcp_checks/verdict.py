"""The verdict engine: check outcomes, their order, and how a run's verdict follows from them.

No data is never a pass: a check that could not measure is ``Inconclusive`` or ``Error``,
and those rank below ``Warn``, so a run with any of them cannot be Ready.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    PASS = "Pass"
    WARN = "Warn"
    INCONCLUSIVE = "Inconclusive"
    FAIL = "Fail"
    ERROR = "Error"


SEVERITY = {
    Outcome.PASS: 0,
    Outcome.WARN: 1,
    Outcome.INCONCLUSIVE: 2,
    Outcome.FAIL: 3,
    Outcome.ERROR: 4,
}
READY_OUTCOMES = frozenset({Outcome.PASS, Outcome.WARN})


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class CheckOutcome:
    """One check's result, with the figures and thresholds that explain it."""

    name: str
    outcome: Outcome
    reason: str
    message: str
    observed: dict[str, str] = field(default_factory=dict)
    thresholds: dict[str, str] = field(default_factory=dict)
    measured_at: str = field(default_factory=utc_now)


@dataclass(frozen=True)
class RunVerdict:
    outcome: Outcome
    score: int
    ready: bool
    reason: str
    message: str


def worst(outcomes: list[Outcome]) -> Outcome:
    return max(outcomes, key=SEVERITY.__getitem__)


def decide(checks: list[CheckOutcome]) -> RunVerdict:
    """The run's verdict is its worst check; the score is the share of checks that passed."""
    if not checks:
        return RunVerdict(
            Outcome.INCONCLUSIVE, 0, False, "NoChecks", "no checks ran, so nothing was verified"
        )
    outcome = worst([c.outcome for c in checks])
    passed = sum(1 for c in checks if c.outcome == Outcome.PASS)
    score = round(100 * passed / len(checks))
    ready = outcome in READY_OUTCOMES
    culprits = [c for c in checks if SEVERITY[c.outcome] == SEVERITY[outcome]]
    if ready:
        reason = "ChecksPassed" if outcome == Outcome.PASS else "ChecksPassedWithWarnings"
        message = f"{passed}/{len(checks)} checks passed"
    else:
        reason = culprits[0].reason
        message = "; ".join(f"{c.name}: {c.message}" for c in culprits)
    return RunVerdict(outcome, score, ready, reason, message)
