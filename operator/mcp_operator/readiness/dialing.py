"""Every address an MCPReadiness makes the operator dial, through the one target policy before
any check runs: the target alone was gated, while metricDrift's Prometheus and the xDS sources
(syncz, Envoy admin, CSDS ``host:port``) were dialled wherever the spec pointed."""

from __future__ import annotations

import asyncio

from ..api.readiness import MCPReadinessSpec
from ..targets import SpecProblem
from ..targets.policy import TargetPolicy


def dialed_addresses(spec: MCPReadinessSpec) -> list[tuple[str, str]]:
    """(field path, URL or ``host:port``) of every check source the spec names; the target is
    resolved (and gated) on its own path, and a drill's server request URLs on the drill's."""
    checks = spec.checks
    out: list[tuple[str, str]] = []
    if checks.metric_drift is not None:
        out.append(("spec.checks.metricDrift.prometheusUrl", checks.metric_drift.prometheus_url))
    if checks.xds_sync is not None:
        out += [
            (f"spec.checks.xdsSync.sources[{i}].address", source.address)
            for i, source in enumerate(checks.xds_sync.sources)
        ]
    return out


async def dial_problems(spec: MCPReadinessSpec, policy: TargetPolicy | None = None) -> list[SpecProblem]:
    """``TargetNotAllowed`` for each address the policy forbids, ``TargetUnresolvable`` for each
    cluster-only name while the operator (which dials them all) runs outside the cluster, and
    ``TargetUnresolved`` for each name that does not resolve yet (looked at again), naming its
    field."""
    policy = policy or TargetPolicy.from_env()
    addresses = dialed_addresses(spec)
    # at once: each name may take a resolver's timeout, and a spec may name 16 sources
    found = await asyncio.gather(*(policy.url_problem(address) for _, address in addresses))
    return [
        SpecProblem(problem.reason, f"{where}: {problem}")
        for (where, _), problem in zip(addresses, found, strict=True)
        if problem is not None
    ]
