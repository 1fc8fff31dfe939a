"""What a spec asks the shards to collect beyond the client's own figures, so the merged result
can be diagnosed (status.diagnostics): the server's metrics and Triton statistics around each
level (``spec.observe``) and request classes and shape sweeps (``spec.workload``), as the plan's
``observe`` and ``payload`` fields. Every URL a spec names here passes the same checks as the
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


def workload_payload(spec: MCPBenchmarkSpec) -> dict[str, Any]:
    """The plan's payload fields for the spec's request classes, shape sweep and output length."""
    wl = spec.workload
    if wl is None:
        return {}
    out: dict[str, Any] = {}
    if wl.classes:
        out["classes"] = [
            {"name": c.name, "weight": c.weight, "priority": c.priority, "latency_p99_ms": c.latency_p99_ms}
            for c in wl.classes
        ]
    if wl.shape_sweep is not None:
        out["shape_sweep"] = {
            "input_tokens": list(wl.shape_sweep.input_tokens),
            "repeats": wl.shape_sweep.repeats,
        }
    if wl.max_output_tokens is not None:
        out["max_output_tokens"] = wl.max_output_tokens
    return out


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
