"""The xDS sync verdict: every source reduced to per-proxy, per-type states, judged by one rule.

Fail on any NACK (with the client's error text); a proxy stale for less than the grace period
has not converged yet, which is Inconclusive (never a Warn that lets a gate be Ready), and Fail
after it; Inconclusive when a source does not answer or a required type is not reported, Error
when a source answers with something malformed. Never Pass on missing data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mcp_checks.verdict import SEVERITY, CheckOutcome, Finding, Verdict, worst
from mcp_checks.xds.memory import XdsMemory
from mcp_checks.xds.model import STATE_RANK, SourceAnswer, SyncState, TypeStatus, XdsSyncSpec

MAX_LISTED = 50  # per-proxy rows kept in ``observed``; counts cover the rest
# the order of findings that share a verdict: a rejection explains the staleness it leaves behind
REASON_RANK = {
    reason: rank
    for rank, reason in enumerate(
        (
            "MalformedAnswer",
            "ProxyNacked",
            "ResourceDoesNotExist",
            "ProxyDisappeared",
            "ProxyMissing",
            "TooFewProxies",
            "ProxyStale",
        )
    )
}


@dataclass(frozen=True)
class _Seen:
    status: TypeStatus
    source: str


def effective(spec: XdsSyncSpec, status: TypeStatus) -> TypeStatus:
    """Apply the spec's expected version: ACKed on another version is stale, ACKed on no version
    at all says nothing about it (unknown, never a match), and stale with rejected updates
    counted (Envoy's ``update_rejected``) is a rejection."""
    expected = spec.expected_version
    if not expected or status.version == expected:
        return status
    if status.state == SyncState.SYNCED and not status.version:
        detail = f"ACKed without a version, expected {expected}"
        return replace(status, state=SyncState.UNKNOWN, detail=detail, reason="VersionNotReported")
    if status.state == SyncState.SYNCED:
        status = replace(
            status, state=SyncState.STALE, detail=f"on version {status.version}, expected {expected}"
        )
    if status.state == SyncState.STALE and status.rejections > 0:
        detail = f"{status.rejections} updates rejected; {status.detail}"
        status = replace(status, state=SyncState.REJECTED, detail=detail)
    return status


def _stale_since(spec: XdsSyncSpec, status: TypeStatus) -> float | None:
    """Staleness began no earlier than the source says and no earlier than the last change."""
    marks = [t for t in (status.since, spec.changed_at) if t is not None]
    return max(marks) if marks else None


def _judge_type(
    spec: XdsSyncSpec, proxy: str, seen: _Seen, now: float, stale_since: dict[str, float]
) -> Finding | None:
    status, subject = seen.status, f"{proxy}/{seen.status.xds_type}"
    version = status.version or "?"
    if status.state == SyncState.REJECTED:
        return Finding(
            subject,
            Verdict.FAIL,
            "ProxyNacked",
            f"NACKed version {version}: {status.detail}",
            "ACKED",
            seen.source,
        )
    if status.state == SyncState.STALE:
        since = _stale_since(spec, status)
        threshold = f"stale < {spec.grace_s:g}s"
        # a source that does not say since when counts from the first time this check saw it
        # stale: neither failed at once nor excused for ever
        counted = "" if since is not None else " (since unknown: counted from first seen)"
        if since is None:
            since = stale_since.setdefault(subject, now)
        age = max(0.0, now - since)
        converging = age < spec.grace_s
        outcome = Verdict.INCONCLUSIVE if converging else Verdict.FAIL
        return Finding(
            subject,
            outcome,
            "ProxyStale",
            f"{'not converged yet: ' if converging else ''}stale {age:.1f}s{counted} at {version}: "
            f"{status.detail}",
            threshold,
            seen.source,
        )
    if status.state == SyncState.UNKNOWN:
        if status.missing:
            return Finding(
                subject,
                Verdict.FAIL,
                "ResourceDoesNotExist",
                "the control plane says the requested resource does not exist",
                "exists",
                seen.source,
            )
        return Finding(
            subject,
            Verdict.INCONCLUSIVE,
            status.reason or "TypeNotReported",
            status.detail if status.reason else f"status {status.detail or 'unknown'}",
            f"ACKED {spec.expected_version}" if status.reason == "VersionNotReported" else "ACKED",
            seen.source,
        )
    return None


def _merge(spec: XdsSyncSpec, answers: list[SourceAnswer]) -> dict[str, dict[str, _Seen]]:
    """Proxy -> type -> the worst state any source reports for it."""
    merged: dict[str, dict[str, _Seen]] = {}
    for answer in answers:
        for proxy in answer.proxies:
            types = merged.setdefault(proxy.proxy_id, {})
            for raw in proxy.types:
                status = effective(spec, raw)
                held = types.get(status.xds_type)
                if held is None or STATE_RANK[status.state] > STATE_RANK[held.status.state]:
                    types[status.xds_type] = _Seen(status, answer.source)
    return merged


def _source_findings(answers: list[SourceAnswer]) -> list[Finding]:
    """A source that does not answer leaves its proxies' state unknown (a dead client's own CSDS
    is exactly such a source): Inconclusive, never a Warn that lets the gate be Ready."""
    findings = []
    for a in answers:
        if a.malformed:
            findings.append(Finding(a.source, Verdict.ERROR, "MalformedAnswer", a.malformed, "", a.source))
        elif a.unreachable:
            findings.append(
                Finding(
                    a.source, Verdict.INCONCLUSIVE, "SourceUnreachable", a.unreachable, "answers", a.source
                )
            )
    return findings


def _outcome(
    spec: XdsSyncSpec, findings: list[Finding], observed: dict[str, str], sources: str
) -> CheckOutcome:
    thresholds = {"graceSeconds": f"{spec.grace_s:g}", "types": ",".join(spec.types)}
    if spec.expected_version:
        thresholds["expectedVersion"] = spec.expected_version
    if spec.min_proxies is not None:
        thresholds["minProxies"] = str(spec.min_proxies)
    # worst first; within a verdict the finding that explains most first (a NACK before the
    # staleness it causes)
    findings.sort(key=lambda f: (-SEVERITY[f.outcome], REASON_RANK.get(f.reason, len(REASON_RANK))))
    if not findings:
        n = observed.get("proxiesReported", "0")
        version = f" on version {spec.expected_version}" if spec.expected_version else ""
        return CheckOutcome(
            spec.name,
            Verdict.PASS,
            "ProxiesSynced",
            f"{n} proxies synced on {','.join(spec.types)}{version} ({observed.get('expectedFrom', '')})",
            observed,
            thresholds,
            source=sources,
            findings=findings,
        )
    verdict = worst([f.outcome for f in findings])
    top = [f for f in findings if f.outcome == verdict]
    message = "; ".join(f"{f.subject}: {f.observed}" for f in top[:5])
    if len(top) > 5:
        message += f" (and {len(top) - 5} more)"
    return CheckOutcome(
        spec.name, verdict, top[0].reason, message, observed, thresholds, source=sources, findings=findings
    )


def _absent(
    spec: XdsSyncSpec, reported: set[str], memory: XdsMemory, now: float, sources: str
) -> list[Finding]:
    """Who should be there and is not: an expected proxy no source reports (``ProxyDisappeared``
    when an earlier look saw it, else ``ProxyMissing``); with no proxies named, one
    an earlier look saw (a dead client leaves its control plane's list, and must not leave the
    judged set with it); fewer than ``min_proxies`` (``TooFewProxies``). Judged only when every
    source answered: a silent source explains a missing proxy already."""
    findings = []
    named = spec.expected_proxies
    pool = set(memory.proxies_seen) if named is None else set(named)
    for proxy in sorted(pool - reported):
        last = memory.proxies_seen.get(proxy)
        if last is not None:
            why, observed = "ProxyDisappeared", f"reported {now - last:.1f}s ago and by no source now"
        elif named is not None:
            why, observed = "ProxyMissing", "no source reports this proxy"
        else:
            continue
        findings.append(Finding(proxy, Verdict.FAIL, why, observed, "reported", sources))
    counted = len(reported) if named is None else len(reported & set(named))
    if spec.min_proxies is not None and counted < spec.min_proxies:
        findings.append(
            Finding(
                "target",
                Verdict.FAIL,
                "TooFewProxies",
                f"{counted} proxies reported, at least {spec.min_proxies} required",
                f">= {spec.min_proxies} proxies",
                sources,
            )
        )
    return findings


def _no_expected_set(spec: XdsSyncSpec, reported: set[str], sources: str) -> Finding | None:
    """The spec names nobody who should be there: what the sources report cannot vouch for
    itself (a dead client simply leaves it), so it is no evidence, and none at all is less."""
    if spec.min_proxies == 0:
        return None  # the spec says none may be there
    if spec.expected_proxies is not None and not spec.expected_proxies:
        return Finding(
            "target",
            Verdict.INCONCLUSIVE,
            "NoProxiesSelected",
            "the target selects no proxy",
            ">= 1 proxy",
            sources,
        )
    if spec.expected_proxies is not None or spec.min_proxies is not None:
        return None
    if not reported:
        return Finding(
            "target",
            Verdict.INCONCLUSIVE,
            "NoProxiesReported",
            "the sources report no proxy at all, and the spec says none may be missing",
            ">= 1 proxy",
            sources,
        )
    return Finding(
        "target",
        Verdict.INCONCLUSIVE,
        "NoExpectedProxies",
        f"{len(reported)} proxies reported, but nothing independent says who should be there: name them "
        "(proxies.ids, --proxy), select their pods (proxies.matchLabels or service, --selector) or set "
        "minProxies (--min-proxies)",
        "an expected set",
        sources,
    )


def _expected_from(spec: XdsSyncSpec) -> str:
    parts = []
    if spec.expected_proxies is not None:
        parts.append(f"{len(spec.expected_proxies)} expected")
    if spec.min_proxies is not None:
        parts.append(f"at least {spec.min_proxies} required")
    return ", ".join(parts) or "no expected set"


def judge(
    spec: XdsSyncSpec, answers: list[SourceAnswer], now: float, memory: XdsMemory | None = None
) -> CheckOutcome:
    """The sources' answers -> the check's outcome (``now`` is epoch seconds). ``memory`` holds
    what earlier looks of the same caller saw (updated in place); without it, this look is the
    first: a stale proxy with no time is first seen ``now``, no proxy can have disappeared, and
    an ``expected_version`` became expected ``now``."""
    memory = XdsMemory() if memory is None else memory
    sources = ", ".join(a.source for a in answers)
    if not answers:
        return CheckOutcome(spec.name, Verdict.INCONCLUSIVE, "NoSources", "no xDS source is configured")
    marks = [t for t in (spec.changed_at, memory.expect(spec.expected_version, now)) if t is not None]
    spec = replace(spec, changed_at=max(marks) if marks else None)
    findings = _source_findings(answers)
    if not any(a.answered for a in answers):
        return _outcome(spec, findings, {"sourcesAnswered": "0"}, sources)
    merged = _merge(spec, [a for a in answers if a.answered])
    reported = set(merged)
    unvouched = _no_expected_set(spec, reported, sources)
    if unvouched is not None:
        findings.append(unvouched)
    if all(a.answered for a in answers):
        findings.extend(_absent(spec, reported, memory, now, sources))
    expected = reported if spec.expected_proxies is None else set(spec.expected_proxies)
    for proxy in sorted(reported - expected):
        findings.append(
            Finding(
                proxy,
                Verdict.WARN,
                "ProxyNotInCluster",
                "reported by the control plane but not selected by the target",
                "selected",
                sources,
            )
        )
    counts = dict.fromkeys(SyncState, 0)
    rows: dict[str, str] = {}
    for proxy in sorted(expected & reported):
        types = merged[proxy]
        row = []
        for xds_type in spec.types:
            seen = types.get(xds_type)
            if seen is None:
                seen = _Seen(TypeStatus(xds_type, SyncState.UNKNOWN, detail="not reported"), sources)
            counts[seen.status.state] += 1
            row.append(f"{xds_type}={seen.status.state.value}")
            finding = _judge_type(spec, proxy, seen, now, memory.stale_since)
            if finding is not None:
                findings.append(finding)
        if len(rows) < MAX_LISTED:
            rows[f"proxy/{proxy}"] = " ".join(row)
    stale_now = {f.subject for f in findings if f.reason == "ProxyStale"}
    for subject in [s for s in memory.stale_since if s not in stale_now]:  # synced again: a
        del memory.stale_since[subject]  # later staleness starts its own count
    memory.seen(reported, now)
    observed = {
        "sourcesAnswered": str(sum(a.answered for a in answers)),
        "proxiesExpected": str(len(expected)) if spec.expected_proxies is not None else "-",
        "proxiesReported": str(len(expected & reported)),
        "expectedFrom": _expected_from(spec),
        **{state.value: str(n) for state, n in counts.items()},
        **rows,
    }
    return _outcome(spec, findings, observed, sources)
