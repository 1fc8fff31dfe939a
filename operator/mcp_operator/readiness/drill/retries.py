"""Retry amplification: the requests the target counted over the requests its clients sent, per
loaded stage. Clients that retry failures at once (no backoff, no jitter) send every failed
request again, so during an overload or a fault the server sees several requests for each one
a user made: a retry storm. The server's count comes from its own Prometheus-format counter,
read before and after the stage's load; the clients' from the load itself.

A count that cannot be read, that went backwards (a restarted server) or that is smaller than
what the clients saw succeed (the endpoints do not cover every replica) is no measurement:
the row is Inconclusive, never a pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from mcp_checks.api import Verdict

from ...api.drill import KpiThresholds
from ...api.drillmeasures import ServerRequests
from ...redact import redact_url, url_has_credentials
from ...targets import guarded
from ...targets.policy import TargetPolicy
from .kpi import KpiResult

TIMEOUT_S = 5.0
PARTIAL = 0.95  # the server must have counted at least this share of what clients saw succeed


@dataclass(frozen=True)
class Reading:
    total: float | None
    problem: str = ""


@dataclass(frozen=True)
class StageRequests:
    stage: str
    server: float | None  # requests the target counted during the stage's load
    sent: int  # requests the clients sent
    completed: int  # of which succeeded
    faults: tuple[str, ...] = ()
    problem: str = ""  # why ``server`` is None


def counter_total(text: str, spec: ServerRequests) -> float | None:
    """The sum of the counter's series that carry every label of ``matchLabels``; None when the
    endpoint does not have the counter at all (a wrong name is not a count of zero). A counter
    it has without a matching series yet counts 0: a labelled series appears at its first
    increment."""
    bases = {c.removesuffix("_total") for c in spec.counters}
    names = bases | {f"{base}_total" for base in bases}
    total, found = 0.0, False
    for family in text_string_to_metric_families(text):
        found = found or family.name in names
        for sample in family.samples:
            if sample.name not in names:
                continue
            found = True
            if all(sample.labels.get(k) == v for k, v in spec.match_labels.items()):
                total += sample.value
    return total if found else None


async def url_problem(spec: ServerRequests) -> str:
    """Why the operator may not read these URLs (its target policy, credentials), or ''."""
    policy = TargetPolicy.from_env()
    for url in spec.urls:
        if url_has_credentials(url):
            return f"{redact_url(url)}: serverRequests URLs must not carry credentials"
        try:
            problem = str(await policy.url_problem(url) or "")
        except ValueError as exc:
            problem = f"not a URL the operator can read: {exc}"
        if problem:
            return f"{redact_url(url)}: {problem}"
    return ""


async def read_requests(spec: ServerRequests, session: aiohttp.ClientSession | None = None) -> Reading:
    """The counter summed over every endpoint, or why it could not be read (a URL the target
    policy forbids is never requested)."""
    problem = await url_problem(spec)
    if problem:
        return Reading(None, problem)
    own = session is None
    session = session or guarded.session(TIMEOUT_S)  # the policy again on each address connected to
    try:
        total = 0.0
        for url in spec.urls:
            try:
                async with session.get(url) as resp:
                    if resp.status != 200:
                        return Reading(None, f"{url} answered {resp.status}")
                    text = await resp.text()
            except (TimeoutError, aiohttp.ClientError) as exc:
                return Reading(None, f"{url}: {type(exc).__name__}: {exc}")
            try:
                value = counter_total(text, spec)
            except ValueError as exc:
                return Reading(None, f"{url} is not Prometheus text: {exc}")
            if value is None:
                labels = ",".join(f"{k}={v}" for k, v in sorted(spec.match_labels.items()))
                counters = " or ".join(spec.counters)
                return Reading(None, f"{url} has no {counters}" + (f" with {labels}" if labels else ""))
            total += value
        return Reading(total)
    finally:
        if own:
            await session.close()


def stage_requests(
    stage: str, before: Reading, after: Reading, sent: int, completed: int, faults: Sequence[str]
) -> StageRequests:
    if before.total is None or after.total is None:
        return StageRequests(stage, None, sent, completed, tuple(faults), before.problem or after.problem)
    delta = after.total - before.total
    if delta < 0:
        problem = f"the counter went back from {before.total:g} to {after.total:g} (a restarted server)"
        return StageRequests(stage, None, sent, completed, tuple(faults), problem)
    return StageRequests(stage, delta, sent, completed, tuple(faults))


def _evidence(row: StageRequests) -> str:
    return f"stage {row.stage}" + (f" with {', '.join(row.faults)}" if row.faults else "")


def amplification_kpi(rows: Sequence[StageRequests], t: KpiThresholds) -> KpiResult | None:
    """The worst stage's server/client ratio against the limit: above it, clients retry without
    backoff (RetryStorm)."""
    if not rows:
        return None
    name = "retryAmplification"
    threshold = f"<= {t.retry_amplification:g}x"
    warn = "" if t.retry_amplification_warn is None else f"> {t.retry_amplification_warn:g}x"
    for row in rows:
        if row.server is None:
            why = f"no server-side count for stage {row.stage}: {row.problem}"
            return KpiResult(name, Verdict.INCONCLUSIVE, "ServerRequestsUnavailable", why, threshold, warn)
        if row.server < PARTIAL * row.completed:
            why = (
                f"the target counted {row.server:g} requests in stage {row.stage} but clients saw "
                f"{row.completed} succeed: serverRequests.urls do not cover every replica"
            )
            return KpiResult(
                name, Verdict.INCONCLUSIVE, "PartialServerRequests", why, threshold, warn, _evidence(row)
            )
    loaded = [r for r in rows if r.sent > 0 and r.server is not None]
    if not loaded:
        return KpiResult(name, Verdict.INCONCLUSIVE, "NoRequests", "no stage sent requests", threshold, warn)
    worst = max(loaded, key=lambda r: (r.server or 0.0) / r.sent)
    ratio = (worst.server or 0.0) / worst.sent
    measured = f"{ratio:.2f}x ({worst.server:g} at the server for {worst.sent} sent)"
    if ratio > t.retry_amplification:
        return KpiResult(name, Verdict.FAIL, "RetryStorm", measured, threshold, warn, _evidence(worst))
    if t.retry_amplification_warn is not None and ratio > t.retry_amplification_warn:
        return KpiResult(name, Verdict.WARN, "RetryAmplified", measured, threshold, warn, _evidence(worst))
    return KpiResult(name, Verdict.PASS, "NoRetryStorm", measured, threshold, warn, _evidence(worst))
