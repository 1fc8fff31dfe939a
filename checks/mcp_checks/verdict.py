"""The verdict engine: check outcomes, their order, and how a run's verdict follows from them.

No data is never a pass: a check that could not measure is ``Inconclusive`` or ``Error``,
and those rank below ``Warn``, so a run with any of them cannot be Ready.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    """Outcome of one check or of a whole run, ordered from best to worst (the one verdict type:
    the operator's API models and status use it too)."""

    PASS = "Pass"
    WARN = "Warn"
    INCONCLUSIVE = "Inconclusive"
    FAIL = "Fail"
    ERROR = "Error"


SEVERITY = {
    Verdict.PASS: 0,
    Verdict.WARN: 1,
    Verdict.INCONCLUSIVE: 2,
    Verdict.FAIL: 3,
    Verdict.ERROR: 4,
}
READY_OUTCOMES = frozenset({Verdict.PASS, Verdict.WARN})


def utc_now() -> str:
    """Now as RFC 3339 in UTC, to the second: the form of every timestamp in status and conditions."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Finding:
    """One observation behind a check's verdict: a proxy out of sync, a pod on an old config
    hash, a series that drifts. ``subject`` says what it is about, ``source`` where it was read."""

    subject: str
    outcome: Verdict
    reason: str
    observed: str
    threshold: str = ""
    source: str = ""


@dataclass
class CheckOutcome:
    """One check's result, with the figures and thresholds that explain it, the source it read
    (a URL with credentials redacted, or an API object), and its findings, worst first."""

    name: str
    outcome: Verdict
    reason: str
    message: str
    observed: dict[str, str] = field(default_factory=dict)
    thresholds: dict[str, str] = field(default_factory=dict)
    measured_at: str = field(default_factory=utc_now)
    source: str = ""
    findings: list[Finding] = field(default_factory=list)
    duration_s: float | None = None  # how long the check took (set by the suite that ran it)


@dataclass(frozen=True)
class RunVerdict:
    outcome: Verdict
    score: int
    ready: bool
    reason: str
    message: str


def worst(outcomes: list[Verdict]) -> Verdict:
    return max(outcomes, key=SEVERITY.__getitem__)


def decide(checks: list[CheckOutcome]) -> RunVerdict:
    """The run's verdict is its worst check; the score is the share of checks that passed."""
    if not checks:
        return RunVerdict(
            Verdict.INCONCLUSIVE, 0, False, "NoChecks", "no checks ran, so nothing was verified"
        )
    outcome = worst([c.outcome for c in checks])
    passed = sum(1 for c in checks if c.outcome == Verdict.PASS)
    score = round(100 * passed / len(checks))
    ready = outcome in READY_OUTCOMES
    culprits = [c for c in checks if SEVERITY[c.outcome] == SEVERITY[outcome]]
    if ready:
        reason = "ChecksPassed" if outcome == Verdict.PASS else "ChecksPassedWithWarnings"
        message = f"{passed}/{len(checks)} checks passed"
    else:
        reason = culprits[0].reason
        message = "; ".join(f"{c.name}: {c.message}" for c in culprits)
    return RunVerdict(outcome, score, ready, reason, message)
