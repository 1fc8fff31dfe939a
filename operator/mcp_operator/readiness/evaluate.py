"""MCPReadiness evaluation: resolve the target, check the spec's semantics, run the checks,
and decide when a standing gate is due again.

Kept free of kopf so the same path serves the operator and tests; Kubernetes reads come in
through a small callable (``ServiceExists``) rather than a client object.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

from mcp_checks.api import (
    CheckContext,
    CheckOutcome,
    HealthProbeRunner,
    SpecError,
    XdsMemory,
    plan_checks,
    required_samples,
    run_health_probe,
)
from mcp_checks.api import run_checks as run_suite

from ..api.readiness import DECIDED_PHASES, MCPReadinessSpec, MCPReadinessStatus, ReadinessChecks
from ..targets import ServiceExists, SpecProblem, credentials_problem, resolve_url
from ..targets.guarded import check_hooks
from .dialing import dialed_addresses

# MCPReadiness sends no headers: a URL's credentials have nowhere else to go
CREDENTIALS_HINT = "a URL is copied into status, events and logs; use an endpoint that needs none"


async def resolve_target(spec: MCPReadinessSpec, namespace: str, exists: ServiceExists) -> str | SpecProblem:
    return await resolve_url(spec.target.url, spec.target.service_ref, namespace, exists)


def url_fields(spec: MCPReadinessSpec) -> list[tuple[str, str]]:
    """Every URL-like field of the spec that is set, as (field path, value)."""
    fields: list[tuple[str, str]] = []
    if spec.target.url:
        fields.append(("spec.target.url", spec.target.url))
    if spec.checks.health_probe is not None:
        fields.append(("spec.checks.healthProbe.path", spec.checks.health_probe.path))
    fields += dialed_addresses(spec)  # the check sources the operator dials
    if spec.drill is not None:
        fields += _drill_url_fields(spec)
    return fields


def _drill_url_fields(spec: MCPReadinessSpec) -> list[tuple[str, str]]:
    assert spec.drill is not None
    fields = [
        (f"spec.drill.stages[{i}].load.path", stage.load.path)
        for i, stage in enumerate(spec.drill.stages)
        if stage.load is not None
    ]
    if spec.drill.server_requests is not None:
        urls = spec.drill.server_requests.urls
        fields += [(f"spec.drill.serverRequests.urls[{i}]", url) for i, url in enumerate(urls)]
    return fields


def semantic_problems(spec: MCPReadinessSpec) -> list[SpecProblem]:
    """URLs that carry credentials (first: nothing of such a spec may run), thresholds that no
    run could verify as written, and checks that cannot be built."""
    problems = []
    leaking = credentials_problem(url_fields(spec), CREDENTIALS_HINT)
    if leaking is not None:
        problems.append(leaking)
    probe = spec.checks.health_probe
    if probe is not None and probe.enabled:
        needed = required_samples(probe.min_success_ratio)
        if needed is None or probe.requests < needed:
            why = (
                f"at least {needed} are needed"
                if needed
                else "no finite round can verify 1.0 (one more probe could always fail); 0.9999 needs 10,000"
            )
            problems.append(
                SpecProblem(
                    "ImpossibleThreshold",
                    f"checks.healthProbe.minSuccessRatio {probe.min_success_ratio} cannot be verified with "
                    f"{probe.requests} requests; {why}",
                )
            )
    try:
        planned = plan_checks(suite_checks(spec))
    except SpecError as exc:
        problems.append(SpecProblem("InvalidCheck", str(exc)))
    else:
        if not planned:
            problems.append(
                SpecProblem("NoChecks", "spec.checks enables no check, so nothing would be verified")
            )
    return problems


async def run_checks(
    spec: MCPReadinessSpec,
    base_url: str,
    namespace: str,
    *,
    health_probe: HealthProbeRunner = run_health_probe,
    probe_slot: Callable[[str], AbstractAsyncContextManager[None]] | None = None,
    api_client: Any = None,
    xds_memory: XdsMemory | None = None,
) -> list[CheckOutcome]:
    """Every enabled check at once, each within its own timeout (``mcp_checks.suite``, the same
    path ``mcp-check -f`` takes); ``health_probe`` runs a round (the operator passes its bounded,
    out-of-process prober) once ``probe_slot`` admits it (the wait is queue time, not the check's);
    ``xds_memory`` is what the xDS check saw in the gate's earlier rounds (updated in place)."""
    context = CheckContext(
        namespace, base_url, api_client, health_probe, dial=check_hooks(), xds_memory=xds_memory
    )
    if probe_slot is not None:
        context = replace(context, probe_slot=probe_slot)
    return await run_suite(plan_checks(suite_checks(spec)), context)


def suite_checks(spec: MCPReadinessSpec) -> ReadinessChecks:
    """``spec.checks`` as the suite plans it: each check its typed spec (``mcp_checks.specs``, with
    the API's rules on top); a null probe is off, as is a check left out."""
    return spec.checks


def recheck_due(spec: MCPReadinessSpec, status: MCPReadinessStatus, now: dt.datetime) -> bool:
    """A standing gate is evaluated again once its interval has passed since the last verdict."""
    if spec.recheck_interval_seconds is None or spec.suspend:
        return False
    completed = status.completed_at
    if status.phase not in DECIDED_PHASES or not completed:
        return False
    last = dt.datetime.strptime(completed, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return (now - last).total_seconds() >= spec.recheck_interval_seconds
