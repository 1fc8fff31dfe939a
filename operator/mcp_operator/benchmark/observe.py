"""What a spec asks the shards to collect beyond the client's own figures, so the merged result
can be diagnosed (status.diagnostics): the server's metrics and Triton statistics around each
level (``spec.observe``), as the plan's ``observe`` field (``spec.workload`` is
``benchmark.workload``'s). Every URL a spec names here passes the same checks as the
target's: no credentials in it, and the operator's target policy."""

from __future__ import annotations

from typing import Any

from ..api.benchmark import MCPBenchmarkSpec
from ..policy import TargetPolicy
from ..redact import url_has_credentials
from ..targets import SpecProblem


def observe_plan(spec: MCPBenchmarkSpec) -> dict[str, Any]:
    """The plan's ``observe``: empty (nothing read) unless the spec asks."""
    obs = spec.observe
    if obs is None:
        return {}
    return {
        "server_metrics": list(obs.server_metrics),
        "triton_stats": list(obs.triton_stats),
        "timeline_interval_s": obs.timeline_interval_seconds,
    }


def observe_urls(spec: MCPBenchmarkSpec) -> list[str]:
    obs = spec.observe
    if obs is None:
        return []
    urls = []
    for entry in [*obs.server_metrics, *obs.triton_stats]:
        _, sep, url = entry.partition("=")
        if sep:
            urls.append(url)
        elif "://" in entry:
            urls.append(entry)
    return urls


async def observe_problem(spec: MCPBenchmarkSpec, policy: TargetPolicy | None = None) -> SpecProblem | None:
    """Why the shards may not read what spec.observe names, or None."""
    policy = policy or TargetPolicy.from_env()
    for url in observe_urls(spec):
        if url_has_credentials(url):
            return SpecProblem(
                "CredentialsInUrl", "spec.observe URLs must not carry credentials (userinfo or a token query)"
            )
        problem = await policy.url_problem(url)
        if problem:
            return SpecProblem("TargetNotAllowed", f"spec.observe: {problem}")
    return None
