"""One part of the check (the rollout, the Argo CD Application) and how parts join into one
check row: the worst part decides, and its reason becomes the row's reason."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..verdict import SEVERITY, CheckOutcome, Finding, Verdict, worst


@dataclass
class Assessment:
    outcome: Verdict
    reason: str
    message: str
    findings: list[Finding] = field(default_factory=list)
    observed: dict[str, str] = field(default_factory=dict)


def combine(
    name: str, parts: list[Assessment], source: str, thresholds: dict[str, str] | None = None
) -> CheckOutcome:
    if not parts:
        raise ValueError("nothing was assessed")
    outcome = worst([p.outcome for p in parts])
    culprits = [p for p in parts if p.outcome == outcome]
    observed: dict[str, str] = {}
    findings: list[Finding] = []
    for part in parts:
        observed.update(part.observed)
        findings.extend(part.findings)
    findings.sort(key=lambda f: -SEVERITY[f.outcome])
    return CheckOutcome(
        name=name,
        outcome=outcome,
        reason=culprits[0].reason,
        message="; ".join(p.message for p in culprits),
        observed=observed,
        thresholds=dict(thresholds or {}),
        source=source,
        findings=findings,
    )


def names(items: list[str], limit: int = 10) -> str:
    """A bounded list of names for a message (status must stay small)."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
