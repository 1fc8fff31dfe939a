"""The one path for a spec that cannot run, shared by both resources: Accepted and Ready both
False with the first problem's reason, recorded once and not retried."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .conditions import set_condition
from .targets import SpecProblem
from .targets.policy import UNRESOLVED


@dataclass(frozen=True)
class Refused:
    """A spec that does not run: the status to record for its generation, and why (both
    resources' start paths return it for their handler to record once)."""

    status: dict[str, Any]
    problems: list[SpecProblem]

    @property
    def wait(self) -> bool:
        """Not a refusal: a name that does not resolve yet (DNS may be late); looked at again."""
        return self.problems[0].reason == UNRESOLVED


def rejected_fields(
    conditions: list[dict[str, Any]], generation: int, problems: list[SpecProblem], now: str
) -> dict[str, Any]:
    """Status fields both resources write for a rejected spec (each adds its own)."""
    reason = problems[0].reason
    message = "; ".join(p.message for p in problems)
    conds = set_condition(conditions, "Accepted", False, reason, message, generation, now)
    conds = set_condition(conds, "Ready", False, reason, message, generation, now)
    return {
        "observedGeneration": generation,
        "phase": "Invalid",
        "verdict": "Error",
        "completedAt": now,
        "conditions": conds,
    }


def problems_message(problems: list[SpecProblem]) -> str:
    return "; ".join(p.message for p in problems)
