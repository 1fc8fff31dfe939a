"""A verdict that was the operator's own doing is evaluated again, after a bounded backoff.

A probe round whose prober ran late (``ProberOverloaded``) says nothing about the target, and
neither does a health probe that timed out as a whole (``CheckTimedOut``): each of its requests
is bounded by its own timeout and the round by their sum, so a round past its bound was held up
by the operator (its workers starved, its host busy), not by the target, which would have
answered with failed requests. Such a gate stayed Ready=False until someone edited its spec;
now it is evaluated again 5, 10, 20, 40, 80 s later (capped at 120 s), at most ``MAX_ATTEMPTS``
times, counted in ``status.retry``. A Fail, an Error, or an Inconclusive with any other reason
(no samples, no data) is final: only the operator's own reasons are retried.

Pure: outcome rows, attempts and the time in; a delay, or the status record, out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from mcp_checks.api import CheckOutcome, Verdict

from ..api.readiness import MCPReadinessStatus, RetryRecord

BASE_S = 5.0
CAP_S = 120.0
MAX_ATTEMPTS = 5
HEALTH_PROBE = "health-probe"
PROBER_OVERLOADED = "ProberOverloaded"
TIMED_OUT = "CheckTimedOut"
STAMP = "%Y-%m-%dT%H:%M:%SZ"


def operator_caused(row: CheckOutcome) -> bool:
    """An Inconclusive row that the operator's own load explains, not the target."""
    if row.outcome != Verdict.INCONCLUSIVE:
        return False
    return row.reason == PROBER_OVERLOADED or (row.name == HEALTH_PROBE and row.reason == TIMED_OUT)


def retry_after(outcomes: Sequence[CheckOutcome], attempts: int) -> float | None:
    """Seconds until a round is evaluated again, or None when its verdict is final: retried only
    while every row is Pass, Warn or an operator-caused Inconclusive, and at least one is the
    latter, and fewer than ``MAX_ATTEMPTS`` retries were made for it."""
    if attempts >= MAX_ATTEMPTS:
        return None
    if any(o.outcome in (Verdict.FAIL, Verdict.ERROR) for o in outcomes):
        return None
    inconclusive = [o for o in outcomes if o.outcome == Verdict.INCONCLUSIVE]
    if not inconclusive or not all(operator_caused(o) for o in inconclusive):
        return None
    return min(BASE_S * 2**attempts, CAP_S)


def retry_record(
    previous: RetryRecord | None, retried: bool, outcomes: Sequence[CheckOutcome], now: dt.datetime
) -> dict[str, Any] | None:
    """``status.retry`` after a verdict. ``retried``: this round was the one ``previous`` had
    scheduled (its attempts carry over, one more); any other round starts from none. None: no
    retry was made or is due (a merge patch's null removes an older record); ``nextAt`` None:
    no more are due, the verdict stands."""
    attempts = (0 if previous is None else previous.attempts) + 1 if retried else 0
    delay = retry_after(outcomes, attempts)
    if delay is None and attempts == 0:
        return None
    causes = [o.reason for o in outcomes if operator_caused(o)]
    reason = causes[0] if causes else ("" if previous is None else previous.reason)
    next_at = None if delay is None else (now + dt.timedelta(seconds=delay)).strftime(STAMP)
    # nextAt null, not left out: a merge patch keeps what it leaves out, and an old nextAt would
    # schedule retries forever
    return RetryRecord(attempts=attempts, reason=reason, next_at=next_at).to_patch()


def retry_due(status: MCPReadinessStatus, now: dt.datetime) -> bool:
    """A retry is scheduled and its time has come."""
    next_at = None if status.retry is None else status.retry.next_at
    if not next_at:
        return False
    return dt.datetime.strptime(str(next_at), STAMP).replace(tzinfo=dt.UTC) <= now
