"""What both resources' handlers do the same way: record a rejected spec once."""

from __future__ import annotations

from typing import Any

import kopf

from .. import events, metrics
from ..rejection import problems_message
from ..targets import SpecProblem


def reject(
    body: kopf.Body, patch: kopf.Patch, kind: str, status: dict[str, Any], problems: list[SpecProblem]
) -> None:
    """Write the rejected status and one warning event; no exception, so kopf does not retry."""
    patch.status.update(status)
    metrics.RECONCILIATIONS.labels(kind, "invalid").inc()
    events.warning(body, problems[0].reason, problems_message(problems))
