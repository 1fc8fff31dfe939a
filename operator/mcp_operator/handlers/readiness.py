"""kopf handlers for MCPReadiness: parse, call the domain code, write status. Nothing more."""

from __future__ import annotations

import time
from typing import Any

import kopf
from pydantic import ValidationError

from mcp_bench.plan import format_validation_error

from .. import events, kube, metrics
from ..api.common import GROUP, VERSION
from ..api.readiness import MCPReadinessSpec
from ..readiness import (
    SpecProblem,
    invalid_status,
    resolve_target,
    run_checks,
    running_status,
    semantic_problems,
    verdict_status,
)

PLURAL = "mcpreadinesses"
KIND = "MCPReadiness"


def _already_evaluated(status: kopf.Status, generation: int) -> bool:
    return status.get("observedGeneration") == generation and status.get("phase") in (
        "Succeeded",
        "Failed",
        "Invalid",
        "Suspended",
    )


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("evaluate_readiness")
async def evaluate_readiness(
    spec: kopf.Spec,
    status: kopf.Status,
    meta: kopf.Meta,
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    generation = int(meta["generation"])
    namespace, name = meta["namespace"], meta["name"]
    if _already_evaluated(status, generation):
        return
    conditions = list(status.get("conditions") or [])
    try:
        parsed = MCPReadinessSpec.model_validate(spec)
    except ValidationError as exc:
        _reject(
            body,
            patch,
            conditions,
            generation,
            [SpecProblem("InvalidSpec", f"spec: {format_validation_error(exc)}")],
        )
        return
    if parsed.suspend:
        patch.status.update({"phase": "Suspended", "observedGeneration": generation})
        return
    target = await resolve_target(parsed, namespace, kube.service_exists)
    problems = semantic_problems(parsed)
    if isinstance(target, SpecProblem):
        problems.insert(0, target)
    if problems:
        _reject(body, patch, conditions, generation, problems)
        return
    assert isinstance(target, str)
    progress = running_status(conditions, generation, target)
    await kube.patch_status(PLURAL, namespace, name, progress)
    started = time.monotonic()
    outcomes = await run_checks(parsed, target)
    for outcome in outcomes:
        metrics.CHECK_SECONDS.labels(outcome.name).observe(time.monotonic() - started)
    new_status, verdict = verdict_status(
        progress["conditions"], generation, target, progress["startedAt"], outcomes
    )
    patch.status.update(new_status)
    metrics.VERDICTS.labels(KIND, verdict.outcome.value).inc()
    metrics.RECONCILIATIONS.labels(KIND, "evaluated").inc()
    metrics.READY.labels(namespace, name).set(1 if verdict.ready else 0)
    if verdict.ready:
        events.normal(body, "Ready", f"verdict {verdict.outcome.value}: {verdict.message}")
    else:
        events.warning(body, verdict.reason, f"verdict {verdict.outcome.value}: {verdict.message}")


def _reject(
    body: kopf.Body,
    patch: kopf.Patch,
    conditions: list[dict[str, Any]],
    generation: int,
    problems: list[SpecProblem],
) -> None:
    """Record why the spec cannot run and stop: no exception, so kopf does not retry it."""
    patch.status.update(invalid_status(conditions, generation, problems))
    metrics.RECONCILIATIONS.labels(KIND, "invalid").inc()
    events.warning(body, problems[0].reason, "; ".join(p.message for p in problems))
