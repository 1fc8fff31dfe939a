"""What both resources' handlers do the same way: record a rejected spec once, and wait for a
name that does not resolve yet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import kopf

from .. import events, kube, metrics
from ..conditions import utc_now
from ..rejection import problems_message
from ..targets import SpecProblem
from ..unresolved import RETRY_S, waiting_conditions


def reject(
    body: kopf.Body, patch: kopf.Patch, kind: str, status: dict[str, Any], problems: list[SpecProblem]
) -> None:
    """Write the rejected status and one warning event; no exception, so kopf does not retry."""
    patch.status.update(status)
    metrics.RECONCILIATIONS.labels(kind, "invalid").inc()
    events.warning(body, problems[0].reason, problems_message(problems))


async def wait_for_names(
    body: kopf.Body, plural: str, status: Mapping[str, Any], generation: int, problems: list[SpecProblem]
) -> NoReturn:
    """A spec whose names do not resolve yet: say so (an event when that is news) and look again
    after a while (``unresolved``); never a refusal that stands for the generation."""
    conds, changed = waiting_conditions(status, generation, problems, utc_now())
    await kube.patch_status(
        plural, str(body.metadata.namespace), str(body.metadata.name), {"conditions": conds}
    )
    message = problems_message(problems)
    if changed:
        events.warning(body, problems[0].reason, message)
    raise kopf.TemporaryError(f"{message}; looking again", delay=RETRY_S)
