"""Which evaluation the gate waits for, and what its MCPReadiness, read through the typed
status models (``mcp_checks.status``), allows it to answer now."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from ..exitcodes import ExitCode, for_verdict
from ..status import ReadinessObject, ReleaseRow
from ..verdict import CheckOutcome, Verdict
from .args import UsageError, parse_time

FINAL_PHASES = ("Succeeded", "Failed", "Inconclusive", "Invalid", "Aborted")


@dataclass(frozen=True)
class Wanted:
    """Which evaluation counts: of ``release``, or started at or after ``since``."""

    release: str | None = None
    since: dt.datetime | None = None

    def describe(self) -> str:
        if self.release is not None:
            return f"release {self.release}"
        assert self.since is not None
        return f"an evaluation started at or after {_stamp(self.since)}"


@dataclass
class Decision:
    code: int
    verdict: str  # Pass, Warn, Fail, Inconclusive, Error, or Timeout
    reason: str
    message: str
    outcomes: list[CheckOutcome] = field(default_factory=list)
    release: ReleaseRow | None = None
    note: str = ""  # why this answer came without the evaluation waited for


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class _Verdict:
    """What the status says of its last evaluation: the verdict, the Ready condition's reason and
    message, and the rows (one row for the gate itself where a rejected spec wrote none)."""

    verdict: str
    reason: str
    message: str
    outcomes: list[CheckOutcome]

    @classmethod
    def of(cls, obj: ReadinessObject) -> _Verdict:
        status = obj.status
        ready = status.condition("Ready")
        verdict = Verdict(status.verdict or Verdict.ERROR).value
        reason = (ready.reason if ready is not None else "") or str(status.phase)
        message = "" if ready is None else ready.message
        outcomes = status.outcomes() or [CheckOutcome("gate", Verdict(verdict), reason, message)]
        return cls(verdict, reason, message, outcomes)

    def decision(self, release: ReleaseRow | None, note: str = "") -> Decision:
        return Decision(
            for_verdict(self.verdict), self.verdict, self.reason, self.message, self.outcomes, release, note
        )


def judge(obj: ReadinessObject, wanted: Wanted) -> Decision | None:
    """The decision the gate's object allows now, or None: keep waiting."""
    generation, status = obj.metadata.generation, obj.status
    if status.observed_generation != generation:
        return None  # the operator has not yet taken up the current spec
    if obj.spec.suspend:
        message = "spec.suspend is true: the gate evaluates nothing, so no verdict will come"
        row = CheckOutcome("gate", Verdict.ERROR, "Suspended", message)
        return Decision(ExitCode.NOT_VERIFIED, "Error", "Suspended", message, [row])
    release = status.release
    if status.phase not in FINAL_PHASES or release is None or not release.completed_at:
        return None  # an evaluation is running, or none has finished since it was claimed
    if release.generation != generation:
        return None
    if wanted.release is not None and release.revision != wanted.release:
        return None
    if wanted.since is not None:
        try:
            started = parse_time(release.started_at)
        except UsageError:
            return None
        if started < wanted.since:
            return None
    return _Verdict.of(obj).decision(release)


def _evaluated(generation: int | None, release: ReleaseRow | None) -> str:
    parts = [f"generation {generation}"]
    if release is not None and release.revision is not None:
        parts.append(f"release {release.revision}")
    if release is not None and release.started_at:
        parts.append(f"started {release.started_at}")
    return ", ".join(parts)


def settled(obj: ReadinessObject, wanted: Wanted) -> Decision | None:
    """The answer when no evaluation ``wanted`` can come (``judge`` found none): the current
    spec's evaluation is over and nothing will start another (no ``spec.watch`` and no
    ``spec.recheckIntervalSeconds``: only a spec change would, and that bumps the generation).
    None: one may still come (a spec not taken up yet, a round running, a watch, a timer, or a
    retry the operator scheduled, ``status.retry.nextAt``, for a verdict of its own capacity)."""
    generation, status = obj.metadata.generation, obj.status
    phase = status.phase
    if status.observed_generation != generation or phase not in FINAL_PHASES:
        return None
    if obj.spec.watch is not None or obj.spec.recheck_interval_seconds is not None:
        return None
    release = status.release
    done = release is not None and release.generation == generation and release.completed_at
    if not done and phase != "Invalid":  # a rejected spec may carry no release record
        return None
    if status.retry is not None and status.retry.next_at:
        return None  # the operator evaluates it again (a verdict of its own capacity)
    last = _Verdict.of(obj)
    evaluated = _evaluated(generation, release)
    final = (
        "nothing will evaluate it again (no spec.watch, no spec.recheckIntervalSeconds): only a "
        "change of its spec starts another evaluation"
    )
    if wanted.release is not None:
        judged = (release.revision if release is not None else None) or "no release"
        note = (
            f"--release {wanted.release} waits for an evaluation of release {wanted.release}, and none will "
            f"come: the last one ({evaluated}) judged {judged} with "
            f"{last.verdict}, and {final} (spec.release: {wanted.release} would); a verdict of another "
            f"release does not stand for this one"
        )
        row = CheckOutcome("gate", Verdict.INCONCLUSIVE, "ReleaseNotEvaluated", note)
        return Decision(
            ExitCode.NOT_VERIFIED, "Inconclusive", "ReleaseNotEvaluated", note, [row], release, note
        )
    assert wanted.since is not None
    note = (
        f"--since {_stamp(wanted.since)} waits for an evaluation started at or after it, and none will "
        f"come: {final}. The verdict that stands is of its current spec ({evaluated})"
    )
    return last.decision(release, note)


def _last_seen(obj: ReadinessObject) -> str:
    status = obj.status
    release = status.release
    revision, started, completed = (None, None, None)
    if release is not None:
        revision, started, completed = release.revision, release.started_at, release.completed_at
    verdict = None if status.verdict is None else Verdict(status.verdict).value
    seen = (
        f"generation {obj.metadata.generation}, observed {status.observed_generation}, phase "
        f"{status.phase}, verdict {verdict}, release {revision} started {started} completed {completed}"
    )
    return seen if obj.unreadable is None else f"{seen}; {obj.unreadable}"


def timed_out(
    obj: ReadinessObject | None, wanted: Wanted, waited_s: float, api_error: str | None = None
) -> Decision:
    """Exit 4: no answer within ``--timeout``. ``api_error``: the API server's last failure when
    it did not answer at the end (an outage waited through is a timeout, not a Fail)."""
    if obj is None and api_error is not None:
        seen = f"the API server did not answer ({api_error})"
    elif obj is None:
        seen = "the MCPReadiness does not exist"
    else:
        seen = _last_seen(obj)
    if obj is not None and api_error is not None:
        seen += f"; then the API server stopped answering ({api_error})"
    message = f"no verdict for {wanted.describe()} after {waited_s:.0f}s; last seen: {seen}"
    return Decision(
        ExitCode.TIMEOUT,
        "Timeout",
        "TimedOut",
        message,
        [CheckOutcome("gate", Verdict.ERROR, "TimedOut", message, duration_s=waited_s)],
    )
