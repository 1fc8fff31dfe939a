"""Run observers chosen on the ``mcp-bench run`` command line: GPU telemetry and server-side metrics.

Kept apart from :mod:`mcp_bench.cli` so the flag grammar (``--server-metrics triton``,
``--promql name=expr``, ``--triton-stats model=URL``) is testable without running anything, and
so every observer setting is checked before any traffic is sent.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from mcp_bench.consistency.observer import ConsistencyObserver
from mcp_bench.engines.base import RunObserver
from mcp_bench.observed import COUNTER, GAUGE
from mcp_bench.plan import RunPlan
from mcp_bench.servermetrics.names import DCGM_PORT
from mcp_bench.servermetrics.observer import ServerMetricsObserver
from mcp_bench.servermetrics.probes import (
    PrometheusEndpointProbe,
    PrometheusQueryProbe,
    PromQuery,
    ServerMetricsProbe,
    TritonStatsProbe,
    dcgm_probe,
    triton_probe,
    vllm_probe,
)
from mcp_bench.telemetry import TelemetryConfigError
from mcp_bench.telemetry.observer import TelemetryObserver
from mcp_bench.telemetry.remote import ServingGpuObserver

DEFAULT_GPU_INTERVAL = "100ms"
_NAMED_ENDPOINTS: dict[str, Callable[[str], PrometheusEndpointProbe]] = {
    "triton": triton_probe,
    "vllm": vllm_probe,
}


class ObserverArgError(ValueError):
    """A telemetry or server-metrics flag that cannot be honoured; the message names the flag."""


def add_observer_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--gpu-telemetry",
        nargs="?",
        const=DEFAULT_GPU_INTERVAL,
        metavar="INTERVAL",
        help=f"sample the GPUs with NVML (default interval {DEFAULT_GPU_INTERVAL}, 5ms..); "
        "'unavailable' in the result where there is no NVML or GPU",
    )
    run.add_argument(
        "--server-metrics",
        action="append",
        metavar="triton|vllm|dcgm|URL",
        help="scrape a metrics endpoint before and after each level: 'triton' or 'vllm' (the target's "
        "/metrics), 'triton=URL' / 'vllm=URL' (e.g. Triton's :8002), 'dcgm' (the DCGM exporter at the "
        f"target's host, port {DCGM_PORT}) or 'dcgm=URL' (the serving GPUs, per GPU), or any Prometheus "
        "text URL; repeatable",
    )
    run.add_argument("--prometheus", metavar="URL", help="Prometheus server for --promql queries")
    run.add_argument(
        "--promql",
        action="append",
        metavar="NAME=EXPR",
        help="PromQL expression read before and after each level (a gauge; 'NAME:counter=EXPR' for a "
        "counter); repeatable, needs --prometheus",
    )
    run.add_argument(
        "--server-metrics-interval",
        metavar="INTERVAL",
        help="also sample queue, KV-cache and utilisation gauges of --server-metrics endpoints this often "
        "during each level (default: the plan's observe.timeline_interval_s, 1s; 'off' for none)",
    )
    run.add_argument(
        "--triton-stats",
        action="append",
        metavar="MODEL[=URL]",
        help="Triton statistics extension of MODEL (at the target's URL unless given); repeatable",
    )


def target_base_url(plan: RunPlan) -> str:
    """``scheme://host:port`` of the plan's target (http for a gRPC target's sibling HTTP endpoints)."""
    url = plan.url if "://" in plan.url else f"http://{plan.url}"
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def dcgm_default_url(plan: RunPlan) -> str:
    """The DCGM exporter at the target's host on its default port (a sidecar of the server)."""
    url = plan.url if "://" in plan.url else f"http://{plan.url}"
    host = urlsplit(url).hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{DCGM_PORT}/metrics"


def _split(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise ObserverArgError(f"{flag} expects NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def _http_url(url: str, flag: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ObserverArgError(f"{flag}: {url!r} is not an http:// or https:// URL")
    return url


def server_metrics_probes(
    plan: RunPlan,
    server_metrics: Sequence[str] = (),
    prometheus: str | None = None,
    promql: Sequence[str] = (),
    triton_stats: Sequence[str] = (),
) -> list[ServerMetricsProbe]:
    """The probes the flags ask for, in flag order."""
    base = target_base_url(plan)
    probes: list[ServerMetricsProbe] = []
    for spec in server_metrics:
        kind, sep, url = spec.partition("=")
        if kind == "dcgm":
            probes.append(dcgm_probe(_http_url(url, "--server-metrics") if sep else dcgm_default_url(plan)))
        elif kind in _NAMED_ENDPOINTS:
            target = _http_url(url, "--server-metrics") if sep else base
            probes.append(_NAMED_ENDPOINTS[kind](target))
        else:
            probes.append(PrometheusEndpointProbe(_http_url(spec, "--server-metrics")))
    if promql and prometheus is None:
        raise ObserverArgError("--promql needs --prometheus URL")
    if prometheus is not None:
        if not promql:
            raise ObserverArgError("--prometheus needs at least one --promql NAME=EXPR")
        queries = []
        for text in promql:
            name, expr = _split(text, "--promql")
            kind = GAUGE
            for suffix in (COUNTER, GAUGE):
                if name.endswith(":" + suffix):
                    name, kind = name[: -len(suffix) - 1], suffix
            queries.append(PromQuery(name, expr, kind))
        try:
            probes.append(PrometheusQueryProbe(_http_url(prometheus, "--prometheus"), queries))
        except ValueError as exc:
            raise ObserverArgError(f"--promql: {exc}") from exc
    for spec in triton_stats:
        model, sep, url = spec.partition("=")
        if not model:
            raise ObserverArgError(f"--triton-stats expects MODEL or MODEL=URL, got {spec!r}")
        probes.append(TritonStatsProbe(_http_url(url, "--triton-stats") if sep else base, model))
    names = [p.name for p in probes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ObserverArgError(f"server metrics sources given twice: {', '.join(dupes)}")
    return probes


def build_observers(
    plan: RunPlan,
    gpu_interval_s: float | None = None,
    server_metrics: Sequence[str] = (),
    prometheus: str | None = None,
    promql: Sequence[str] = (),
    triton_stats: Sequence[str] = (),
) -> list[RunObserver]:
    """Build (and so validate) every observer asked for, before the run starts: the flags' and
    the plan's own ``observe`` (its sources first, sampled during levels as it says)."""
    observers: list[RunObserver] = []
    if gpu_interval_s is not None:
        try:
            observers.append(TelemetryObserver(gpu_interval_s))
        except TelemetryConfigError as exc:
            raise ObserverArgError(f"--gpu-telemetry: {exc}") from exc
    if prometheus is not None and plan.observe.prometheus not in (None, prometheus):
        raise ObserverArgError("--prometheus: the plan reads PromQL through observe.prometheus already")
    probes = server_metrics_probes(
        plan,
        [*plan.observe.server_metrics, *server_metrics],
        prometheus or plan.observe.prometheus,
        [*plan.observe.promql, *promql],
        [*plan.observe.triton_stats, *triton_stats],
    )
    if probes:
        observers.append(ServerMetricsObserver(probes, plan.observe.timeline_interval_s))
    if plan.observe.gpu_samplers:  # after the server metrics: its entries join theirs
        urls = [_http_url(u, "observe.gpu_samplers") for u in plan.observe.gpu_samplers]
        try:
            observers.append(ServingGpuObserver(urls))
        except ValueError as exc:
            raise ObserverArgError(f"observe.gpu_samplers: {exc}") from exc
    if plan.consistency is not None:
        observers.append(ConsistencyObserver(plan))
    return observers


def plan_observers(plan: RunPlan) -> list[RunObserver]:
    """The observers the plan itself asks for (``plan.observe``, ``plan.consistency``), e.g. in a
    shard pod."""
    return build_observers(plan)
