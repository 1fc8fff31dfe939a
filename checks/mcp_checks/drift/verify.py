"""The reference's definitions of one record against what Prometheus has loaded: missing,
changed, unhealthy, evaluated too long ago, or loaded beside definitions nobody referenced.

Definitions pair by their labels (a record may be defined once per label set); an expression
is the same when Prometheus prints both sides alike. A loaded definition of the record that the
reference does not hold is a Fail (``UnexpectedRuleDefinition``): it writes series under the same
name, so what the record holds is no longer what was reviewed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config.assessment import Assessment
from ..verdict import SEVERITY, Finding, Verdict
from .loaded import LoadedRule
from .normalise import Comparison
from .rulefile import ExpectedRule

LAG_INTERVALS = 2.0  # a rule last evaluated longer ago than this many of its group's intervals lags
LAG_SLACK_S = 1.0  # plus this, for reading two clocks and a busy scheduler
SHOWN_EXPR = 240  # characters of an expression a message shows (status must stay small)


def shown(expr: str) -> str:
    flat = " ".join(expr.split())
    return flat if len(flat) <= SHOWN_EXPR else flat[: SHOWN_EXPR - 1] + "…"


def how(comparison: Comparison) -> str:
    return "" if comparison.how == "format_query" else f" ({comparison.how})"


def _labels(labels: Sequence[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else ""


@dataclass(frozen=True)
class _Issue:
    verdict: Verdict
    reason: str
    message: str
    subject: str
    observed: str
    threshold: str = ""


def _pair(
    expected: Sequence[ExpectedRule],
    loaded: Sequence[LoadedRule],
    compare: Callable[[str, str], Comparison],
) -> tuple[list[tuple[ExpectedRule, LoadedRule, Comparison]], list[ExpectedRule], list[LoadedRule]]:
    """Same labels and same expression first, then same labels with another expression; what is
    left is missing (reference side) or unexpected (loaded side)."""
    free = list(loaded)
    pairs: list[tuple[ExpectedRule, LoadedRule, Comparison]] = []
    waiting: list[ExpectedRule] = []
    for e in expected:
        for candidate in (c for c in free if c.labels == e.labels):
            verdict = compare(e.expr, candidate.query)
            if verdict.same:
                pairs.append((e, candidate, verdict))
                free.remove(candidate)
                break
        else:
            waiting.append(e)
    missing: list[ExpectedRule] = []
    for e in waiting:
        other = next((c for c in free if c.labels == e.labels), None)
        if other is None:
            missing.append(e)
            continue
        pairs.append((e, other, compare(e.expr, other.query)))
        free.remove(other)
    return pairs, missing, free


def _lag(record: str, rule: LoadedRule, now: float) -> _Issue | None:
    subject = f"{record}{_labels(rule.labels)}"
    if rule.interval_s is None:
        return None
    limit = LAG_INTERVALS * rule.interval_s + LAG_SLACK_S
    threshold = f"<= {limit:g}s ({LAG_INTERVALS:g} x {rule.interval_s:g}s + {LAG_SLACK_S:g}s)"
    if rule.last_evaluation is None:
        return _Issue(
            Verdict.INCONCLUSIVE,
            "RuleNotEvaluatedYet",
            f"{record}: loaded in group {rule.group} but not evaluated yet",
            subject,
            "lastEvaluation=never",
            threshold,
        )
    age = now - rule.last_evaluation
    if age <= limit:
        return None
    return _Issue(
        Verdict.FAIL,
        "RuleEvaluationLagging",
        f"{record}: last evaluated {age:.1f}s ago, group {rule.group} evaluates every {rule.interval_s:g}s",
        subject,
        f"lastEvaluation {age:.1f}s ago",
        threshold,
    )


def verify_loaded(
    record: str,
    expected: Sequence[ExpectedRule],
    loaded: Sequence[LoadedRule],
    compare: Callable[[str, str], Comparison],
    now: float,
    source: str,
) -> Assessment:
    """Fail on anything that makes the loaded record other than the reference's; Pass names the
    reference. ``now`` is Prometheus's own clock (its evaluation times are on it)."""
    origin = expected[0].origin
    observed = {f"{record}.reference": origin}
    if not loaded:
        return Assessment(
            Verdict.FAIL,
            "RuleNotLoaded",
            f"{record}: defined in {origin} but not loaded by {source}",
            [Finding(record, Verdict.FAIL, "RuleNotLoaded", "absent from /api/v1/rules", "", source)],
            observed,
        )
    pairs, missing, extra = _pair(expected, loaded, compare)
    issues: list[_Issue] = []
    for e in missing:
        subject = f"{record}{_labels(e.labels)}"
        issues.append(
            _Issue(
                Verdict.FAIL,
                "RuleNotLoaded",
                f"{subject}: defined in {e.origin} but not loaded by {source}",
                subject,
                "no loaded definition with these labels",
            )
        )
    for e, rule, comparison in pairs:
        if comparison.same:
            continue
        subject = f"{record}{_labels(e.labels)}"
        issues.append(
            _Issue(
                Verdict.FAIL,
                "RuleExpressionChanged",
                f"{subject}: {source} has loaded `{shown(rule.query)}` where {e.origin} has "
                f"`{shown(e.expr)}`{how(comparison)}",
                subject,
                f"loaded `{shown(rule.query)}`",
                f"`{shown(e.expr)}`",
            )
        )
    for rule in loaded:
        if rule.health == "err":
            subject = f"{record}{_labels(rule.labels)}"
            issues.append(
                _Issue(
                    Verdict.FAIL,
                    "RecordingRuleUnhealthy",
                    f"recording rule {record} fails to evaluate: {rule.last_error}",
                    subject,
                    f"health=err: {rule.last_error}",
                )
            )
    for rule in extra:
        subject = f"{record}{_labels(rule.labels)}"
        issues.append(
            _Issue(
                Verdict.FAIL,
                "UnexpectedRuleDefinition",
                f"{subject}: {source} has loaded a definition `{shown(rule.query)}` (group {rule.group}) "
                f"that {origin} does not hold",
                subject,
                f"loaded `{shown(rule.query)}` in group {rule.group}",
            )
        )
    for _, rule, _ in pairs:
        lag = _lag(record, rule, now)
        if lag is not None:
            issues.append(lag)
    text_only = {c.how for _, _, c in pairs if c.how != "format_query"}
    if text_only:
        observed[f"{record}.comparison"] = sorted(text_only)[0]
    if not issues:
        return Assessment(
            Verdict.PASS,
            "RuleLoadedAsReferenced",
            f"{record}: loaded as {origin} defines it",
            observed=observed,
        )
    worst = max(SEVERITY[i.verdict] for i in issues)
    culprits = [i for i in issues if SEVERITY[i.verdict] == worst]
    findings = [Finding(i.subject, i.verdict, i.reason, i.observed, i.threshold, source) for i in issues]
    return Assessment(
        culprits[0].verdict,
        culprits[0].reason,
        "; ".join(i.message for i in culprits),
        findings,
        observed,
    )
