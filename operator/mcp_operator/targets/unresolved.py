"""A spec naming a host that does not resolve yet, shared by both resources: not a refusal that
stands for its generation (cluster DNS may be late, a Service may be created next), not a pass
either. Ready is False with ``TargetUnresolved`` naming the field, Accepted Unknown, and the
handler looks again after ``RETRY_S``; a problem that stands wins over it. A cluster-only name
the operator outside the cluster can never resolve is not waited for: ``TargetUnresolvable``
stands (``policy``)."""

from __future__ import annotations

from typing import Any

from ..api.common import Conditioned
from ..conditions import condition, set_condition
from ..rejection import problems_message
from . import SpecProblem
from .policy import UNRESOLVED

RETRY_S = 15.0
LOOKING_AGAIN = "; looking again"  # ends the handler's retry, which kopf logs (startup quiets it)


def split(problems: list[SpecProblem]) -> tuple[list[SpecProblem], list[SpecProblem]]:
    """(problems that stand, names that do not resolve yet)."""
    standing = [p for p in problems if p.reason != UNRESOLVED]
    return standing, [p for p in problems if p.reason == UNRESOLVED]


def waiting_conditions(
    status: Conditioned, generation: int, problems: list[SpecProblem], now: str
) -> tuple[list[dict[str, Any]], bool]:
    """The conditions while waiting for the names, and whether they say something new (an event
    then, not one per retry)."""
    conditions = status.condition_rows()
    message = f"{problems_message(problems)}; nothing is dialled until it resolves"
    before = condition(status.conditions, "Ready")
    conds = set_condition(conditions, "Accepted", None, UNRESOLVED, message, generation, now)
    conds = set_condition(conds, "Ready", False, UNRESOLVED, message, generation, now)
    after = Conditioned.model_validate({"conditions": conds}).conditions[-1]  # Ready, set last
    changed = before is None or (before.reason, before.message, before.observed_generation) != (
        after.reason,
        after.message,
        after.observed_generation,
    )
    return conds, changed
