"""What a spec asks the shards to collect beyond the client's own figures, so the merged result
can be diagnosed (status.diagnostics): the server's metrics and Triton statistics around each
level (``spec.observe``: metrics endpoints, the DCGM exporter, PromQL through a named
Prometheus), as the plan's ``observe`` field (``spec.workload`` is ``benchmark.workload``'s;
the serving GPUs' sampler URLs are added once ``benchmark.gpusampler_kube`` placed them). Every
URL a spec names here passes the same checks as the target's: no credentials in it, and the
operator's target policy; every Service must exist in a namespace the policy allows."""

from __future__ import annotations

from typing import Any

from ..api.benchmark import MCPBenchmarkSpec
from ..api.common import TargetRef
from ..api.observe import PrometheusSource
from ..redact import url_has_credentials
from ..targets import ServiceExists, SpecProblem
from ..targets.policy import TargetPolicy


def observe_plan(spec: MCPBenchmarkSpec) -> dict[str, Any]:
    """The plan's ``observe``: empty (nothing read) unless the spec asks."""
    obs = spec.observe
    if obs is None:
        return {}
    out: dict[str, Any] = {
        "server_metrics": list(obs.server_metrics),
        "triton_stats": list(obs.triton_stats),
        "timeline_interval_s": obs.timeline_interval_seconds,
        "settle_s": obs.settle_seconds,
    }
    if obs.prometheus is not None:
        out["prometheus"] = prometheus_url(obs.prometheus)
        out["promql"] = [
            f"{q.name}{':counter' if q.type == 'counter' else ''}={q.query}" for q in obs.prometheus.queries
        ]
    return out


def prometheus_url(source: PrometheusSource) -> str:
    """The Prometheus the shards query: its URL, or its Service (in the shards' own namespace
    when none is named, so the short name resolves there)."""
    if source.url:
        return source.url
    ref = source.service_ref
    assert ref is not None  # the CRD's CEL rule: exactly one of url and serviceRef
    host = f"{ref.name}.{ref.namespace}.svc" if ref.namespace else ref.name
    return f"{ref.scheme}://{host}:{ref.port}"


def observe_urls(spec: MCPBenchmarkSpec) -> list[str]:
    obs = spec.observe
    if obs is None:
        return []
    urls = []
    for entry in [*obs.server_metrics, *obs.triton_stats]:
        if entry.startswith(("http://", "https://")):  # a bare URL: any '=' is its query's
            urls.append(entry)
            continue
        _, sep, url = entry.partition("=")
        if sep:
            urls.append(url)
    if obs.prometheus is not None and obs.prometheus.url:
        urls.append(obs.prometheus.url)
    return urls


def observe_services(spec: MCPBenchmarkSpec) -> list[tuple[str, TargetRef]]:
    """The Services spec.observe names (field, reference): each must exist and be allowed."""
    obs = spec.observe
    if obs is None:
        return []
    out = []
    if obs.prometheus is not None and obs.prometheus.service_ref is not None:
        out.append(("spec.observe.prometheus.serviceRef", obs.prometheus.service_ref))
    if obs.gpu_sampler is not None:
        ref = obs.gpu_sampler.service_ref or spec.target.service_ref
        if ref is None:
            raise ValueError("spec.observe.gpuSampler needs a serviceRef when spec.target is a url")
        out.append(("spec.observe.gpuSampler.serviceRef", ref))
    return out


async def observe_problem(
    spec: MCPBenchmarkSpec,
    policy: TargetPolicy | None = None,
    *,
    namespace: str = "",
    exists: ServiceExists | None = None,
) -> SpecProblem | None:
    """Why the shards may not read what spec.observe names, or None. The shards read it from
    inside the cluster, so a cluster-only name an operator outside the cluster cannot resolve is
    left to them (``by_pods``; see ``plan.prepare_plan``)."""
    policy = policy or TargetPolicy.from_env()
    try:
        services = observe_services(spec)
    except ValueError as exc:
        return SpecProblem("GpuSamplerNeedsService", str(exc))
    for field, ref in services:
        ns = ref.namespace or namespace
        problem = policy.namespace_problem(namespace, ns)
        if problem:
            return SpecProblem("TargetNotAllowed", f"{field}: {problem}")
        if exists is not None and not await exists(ns, ref.name):
            return SpecProblem("TargetNotFound", f"{field}: Service {ns}/{ref.name} does not exist")
    for url in observe_urls(spec):
        if url_has_credentials(url):
            return SpecProblem(
                "CredentialsInUrl", "spec.observe URLs must not carry credentials (userinfo or a token query)"
            )
        dial = await policy.url_problem(url, by_pods=True)
        if dial:
            return SpecProblem(dial.reason, f"spec.observe: {dial}")
    return None
