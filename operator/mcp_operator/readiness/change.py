"""What the change handler (a new spec generation of an MCPReadiness) decides before its round:
the spec parsed, or refused (recorded once for its generation); suspended; a drill that was
aborted or lost mid-run ended; a drill held while an earlier drill's fault is still in place;
the target resolved and the spec's semantics checked (a name that does not resolve yet is not a
refusal: ``Refused.wait``, looked at again later).

No kopf here: status fields go into the mapping the handler hands in (kopf's ``patch.status``),
events through the gate's ``announce``, a held drill raises :class:`drills.Held`, and a refusal
comes back as :class:`Refused` for the handler to record.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from mcp_bench.api import format_validation_error

from .. import kube
from ..api.readiness import MCPReadinessSpec, MCPReadinessStatus
from ..api.readinessstatus import read_status
from ..conditions import set_condition, utc_now
from ..rejection import Refused
from ..targets import SpecProblem
from ..targets.unresolved import split
from . import drills
from .dialing import dial_problems
from .drill import journal
from .evaluate import resolve_target, semantic_problems
from .release import precise_now, release_record
from .round import Gate
from .status import rejected_status


@dataclass(frozen=True)
class Accepted:
    """A spec that runs, and the URL of its target."""

    parsed: MCPReadinessSpec
    target: str


def refused(
    status: MCPReadinessStatus,
    generation: int,
    problems: list[SpecProblem],
    release: Mapping[str, Any] | None = None,
) -> Refused:
    conditions = status.condition_rows()
    return Refused(rejected_status(conditions, generation, problems, utc_now(), release), problems)


def suspended_status(status: MCPReadinessStatus, generation: int) -> dict[str, Any]:
    """A suspended gate says so in ``Accepted`` (Unknown: the spec is judged once it runs), so a
    gate created suspended is never without a condition; Ready keeps the last verdict, which
    consumers go on reading."""
    conditions = set_condition(
        status.condition_rows(),
        "Accepted",
        None,
        "Suspended",
        "spec.suspend is true: nothing is judged or evaluated until it is false",
        generation,
        utc_now(),
    )
    return {"phase": "Suspended", "observedGeneration": generation, "conditions": conditions}


async def accept(
    spec: Mapping[str, Any], wire: Mapping[str, Any], gate: Gate, out: MutableMapping[str, Any]
) -> Accepted | Refused | None:
    """The spec and its target for a round; a refusal; or None when nothing more runs for this
    generation (suspended, a drill ended: its status is in ``out``)."""
    status = read_status(wire)
    try:
        parsed = MCPReadinessSpec.model_validate(spec)
    except ValidationError as exc:
        problem = SpecProblem("InvalidSpec", f"spec: {format_validation_error(exc)}")
        return refused(status, gate.generation, [problem])
    if parsed.suspend:
        out.update(suspended_status(status, gate.generation))
        return None
    if parsed.drill is not None and (parsed.drill.abort or drills.interrupted(status, gate.generation)):
        release = release_record(parsed, None, "Spec", gate.generation, precise_now())
        fields, reason, message = drills.ended_status(
            status, gate.generation, release, utc_now(), aborted=parsed.drill.abort
        )
        out.update(fields)
        gate.announce(True, reason, message)
        return None
    left = journal.not_reverted(status.fault_rows())
    if parsed.drill is not None and left:  # no new fault while an old one is in place, and no
        await drills.hold(gate.namespace, gate.name, status, gate.generation, left, gate.announce)
        raise drills.Held("an earlier drill's fault is not reverted yet")  # new journal over it
    return await _target(parsed, status, gate)


async def _target(parsed: MCPReadinessSpec, status: MCPReadinessStatus, gate: Gate) -> Accepted | Refused:
    target = await resolve_target(parsed, gate.namespace, kube.service_exists)
    problems = semantic_problems(parsed) + await dial_problems(parsed)
    if isinstance(target, SpecProblem):
        problems.insert(0, target)
    problems, unresolved = split(problems)
    if problems or unresolved:
        release = release_record(parsed, None, "Spec", gate.generation, precise_now())
        return refused(status, gate.generation, problems or unresolved, release)
    assert isinstance(target, str)
    return Accepted(parsed, target)
