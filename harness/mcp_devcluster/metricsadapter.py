"""An external metrics API for the harness, so that a real HorizontalPodAutoscaler can scale
here: ``external.metrics.k8s.io/v1beta1`` served over HTTPS behind an APIService, with one
metric of real figures, ``mcp_requests_per_second``: the requests a Service's ready endpoints
counted (``mcp_refserver_http_requests_total``, the kubelet's probes and the scrapes left out)
per second, read from each endpoint's /metrics every second.

Selected with ``labelSelector=service=<name>`` in the namespace asked about. A Service seen for
the first time has no rate yet: the answer is 503, so the autoscaler says it cannot read the
metric rather than act on a made-up zero. This is a test tool: it trusts every caller (the
aggregator's requests are not authenticated) and serves a self-signed certificate (the
APIService skips verification).

Run as ``python -m mcp_devcluster.metricsadapter --kubeconfig K --host H --port P
--pod-loopback CIDR``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import ipaddress
import logging
import ssl
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

import aiohttp
from aiohttp import web
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from .certs import self_signed_pair
from .nodes import api_client
from .podnet import loopback_twin

GROUP_VERSION = "external.metrics.k8s.io/v1beta1"
METRIC = "mcp_requests_per_second"
COUNTER = "mcp_refserver_http_requests_total"
EXCLUDED_PATHS = frozenset({"/metrics", "/health"})
SAMPLE_S = 1.0
WINDOW_S = 3.0
log = logging.getLogger("mcp_devcluster.metricsadapter")

Key = tuple[str, str]  # (namespace, service)
Sample = tuple[float, dict[str, float]]  # (time, counter per endpoint)


def requests_counted(text: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == COUNTER and sample.labels.get("path") not in EXCLUDED_PATHS:
                total += sample.value
    return total


def rate(samples: deque[Sample], now: float) -> float | None:
    """Requests per second over the newest sample and the oldest one within the window (at
    least a second apart), summed over the endpoints present in both."""
    if not samples:
        return None
    newest_at, newest = samples[-1]
    old = [s for s in samples if newest_at - s[0] >= SAMPLE_S * 0.9 and now - s[0] <= WINDOW_S + SAMPLE_S]
    if not old:
        return None
    then_at, then = old[0]
    return sum(max(0.0, newest[e] - then[e]) for e in newest if e in then) / (newest_at - then_at)


class Sampler:
    """Reads the counters of every Service asked about, once a second."""

    def __init__(self, kubeconfig: Path, pod_loopback: ipaddress.IPv4Network) -> None:
        self.discovery = client.DiscoveryV1Api(api_client(kubeconfig))
        self.pod_loopback = pod_loopback
        self.samples: dict[Key, deque[Sample]] = {}

    async def endpoints(self, key: Key) -> list[str]:
        namespace, service = key
        slices = await asyncio.to_thread(
            self.discovery.list_namespaced_endpoint_slice,
            namespace,
            label_selector=f"kubernetes.io/service-name={service}",
            _request_timeout=5,
        )
        urls = []
        for s in slices.items:
            ports = [p.port for p in (s.ports or []) if p.port]
            for ep in s.endpoints or []:
                if ports and (ep.conditions is None or ep.conditions.ready is not False):
                    for address in ep.addresses or []:
                        urls.append(f"http://{loopback_twin(address, self.pod_loopback)}:{ports[0]}/metrics")
        return urls

    async def sample(self, session: aiohttp.ClientSession, key: Key) -> None:
        counts: dict[str, float] = {}
        for url in await self.endpoints(key):
            try:
                async with session.get(url) as resp:
                    counts[url] = requests_counted(await resp.text())
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue  # a pod going away: left out of this sample
        self.samples.setdefault(key, deque(maxlen=16)).append((time.time(), counts))

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                for key in list(self.samples):
                    try:
                        await self.sample(session, key)
                    except Exception:
                        log.exception("sampling %s/%s failed", *key)
                await asyncio.sleep(SAMPLE_S)


def build_app(sampler: Sampler) -> web.Application:
    async def resources(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": GROUP_VERSION,
                "resources": [
                    {
                        "name": METRIC,
                        "singularName": "",
                        "namespaced": True,
                        "kind": "ExternalMetricValueList",
                        "verbs": ["get"],
                    }
                ],
            }
        )

    async def value(request: web.Request) -> web.Response:
        namespace, metric = request.match_info["namespace"], request.match_info["metric"]
        selector = request.query.get("labelSelector", "")
        labels = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
        service = labels.get("service")
        if metric != METRIC or not service:
            return web.json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": 404,
                    "message": f"only {METRIC} with labelSelector service=<name> is served",
                },
                status=404,
            )
        key = (namespace, service)
        if key not in sampler.samples:
            sampler.samples[key] = deque(maxlen=16)
        measured = rate(sampler.samples[key], time.time())
        if measured is None:
            return web.json_response(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": 503,
                    "message": f"no rate for Service {namespace}/{service} yet: sampling it",
                },
                status=503,
            )
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        item = {
            "metricName": METRIC,
            "metricLabels": {"service": service},
            "timestamp": stamp,
            "value": f"{round(measured * 1000)}m",
        }
        return web.json_response(
            {"kind": "ExternalMetricValueList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": [item]}
        )

    async def healthy(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.add_routes(
        [
            web.get(f"/apis/{GROUP_VERSION}", resources),
            web.get(f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/{{metric}}", value),
            web.get("/healthz", healthy),
            web.get("/readyz", healthy),
        ]
    )
    return app


def self_signed(host: str, directory: Path) -> ssl.SSLContext:
    cert_path, key_path = self_signed_pair(directory, host, "mcp-metrics-adapter")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    return context


async def serve(args: argparse.Namespace) -> None:
    sampler = Sampler(args.kubeconfig, ipaddress.IPv4Network(args.pod_loopback))
    runner = web.AppRunner(build_app(sampler), access_log=None)
    await runner.setup()
    with tempfile.TemporaryDirectory(prefix="mcp-metrics-adapter-") as work:
        site = web.TCPSite(runner, args.host, args.port, ssl_context=self_signed(args.host, Path(work)))
        await site.start()
        print(f"serving {GROUP_VERSION} on https://{args.host}:{args.port}", file=sys.stderr, flush=True)
        try:
            await sampler.run()
        finally:
            await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mcp_devcluster.metricsadapter", description=__doc__)
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, default=8443)
    p.add_argument("--pod-loopback", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
