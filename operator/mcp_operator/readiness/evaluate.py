"""MCPReadiness evaluation: resolve the target, check the spec's semantics, run the checks,
and decide when a standing gate is due again.

Kept free of kopf so the same path serves the operator and tests; Kubernetes reads come in
through a small callable (``ServiceExists``) rather than a client object.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from mcp_checks.health import HealthProbeSpec, required_samples, run_health_probe
from mcp_checks.verdict import CheckOutcome

from ..api.readiness import HealthProbeCheck, MCPReadinessSpec
from ..targets import ServiceExists, SpecProblem, join_url, resolve_url


async def resolve_target(spec: MCPReadinessSpec, namespace: str, exists: ServiceExists) -> str | SpecProblem:
    return await resolve_url(spec.target.url, spec.target.service_ref, namespace, exists)


def semantic_problems(spec: MCPReadinessSpec) -> list[SpecProblem]:
    """Thresholds that no run could verify as written."""
    problems = []
    probe = spec.checks.health_probe
    if probe is not None:
        needed = required_samples(probe.min_success_ratio)
        if probe.requests < needed:
            problems.append(
                SpecProblem(
                    "ImpossibleThreshold",
                    f"checks.healthProbe.minSuccessRatio {probe.min_success_ratio} cannot be verified with "
                    f"{probe.requests} requests; at least {needed} are needed",
                )
            )
    if not any(c is not None for c in (probe,)):
        problems.append(SpecProblem("NoChecks", "spec.checks enables no check, so nothing would be verified"))
    return problems


def health_probe_spec(check: HealthProbeCheck, base_url: str) -> HealthProbeSpec:
    return HealthProbeSpec(
        url=join_url(base_url, check.path),
        requests=check.requests,
        concurrency=check.concurrency,
        timeout_s=check.timeout_ms / 1000.0,
        expected_status=tuple(check.expected_status),
        min_success_ratio=check.min_success_ratio,
        max_p50_ms=check.max_p50_ms,
        max_p99_ms=check.max_p99_ms,
        max_round_ms=check.max_round_ms,
    )


async def run_checks(spec: MCPReadinessSpec, base_url: str) -> list[CheckOutcome]:
    outcomes = []
    if spec.checks.health_probe is not None:
        outcomes.append(await run_health_probe(health_probe_spec(spec.checks.health_probe, base_url)))
    return outcomes


def recheck_due(spec: MCPReadinessSpec, status: Mapping[str, Any], now: dt.datetime) -> bool:
    """A standing gate is evaluated again once its interval has passed since the last verdict."""
    if spec.recheck_interval_seconds is None or spec.suspend:
        return False
    completed = status.get("completedAt")
    if status.get("phase") not in ("Succeeded", "Failed") or not completed:
        return False
    last = dt.datetime.strptime(completed, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return (now - last).total_seconds() >= spec.recheck_interval_seconds
