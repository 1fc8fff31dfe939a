"""Probes that take a :class:`Snapshot` of one server: its /metrics, Triton's stats, or PromQL answers.

The engine snapshots every probe before and after each level and stores ``probe.delta(before,
after)``. A probe never raises for a server-side failure: the snapshot carries the error kind
(connect, timeout, HTTP status, malformed) and the delta reports ``unavailable``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from mcp_bench import dialguard
from mcp_bench.observed import COUNTER, GAUGE
from mcp_bench.records import ErrorKind
from mcp_bench.servermetrics.delta import delta
from mcp_bench.servermetrics.names import DCGM_METRICS, TRITON_METRICS, VLLM_METRICS
from mcp_bench.servermetrics.snapshot import (
    Family,
    Snapshot,
    label_key,
    parse_prometheus_text,
)
from mcp_bench.servermetrics.triton_stats import parse_triton_stats, stage_means

DEFAULT_TIMEOUT_S = 5.0


class ServerMetricsProbe(Protocol):
    """One source of server-side metrics."""

    name: str

    async def snapshot(self) -> Snapshot: ...

    def delta(self, before: Snapshot, after: Snapshot) -> dict[str, Any]: ...


async def fetch_text(url: str, timeout_s: float, snapshot: Snapshot) -> str | None:
    """GET ``url``; the body, or None after recording the failure on ``snapshot``."""
    connector = aiohttp.TCPConnector(socket_factory=dialguard.socket_factory(dialguard.active_rule()))
    try:
        async with (
            aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=timeout_s), connector=connector
            ) as session,
            session.get(url) as response,
        ):
            body = await response.text()
            if response.status != 200:
                snapshot.failed(ErrorKind.HTTP_STATUS, f"GET {url} answered {response.status}: {body[:200]}")
                return None
            return body
    except TimeoutError:
        snapshot.failed(ErrorKind.TIMEOUT, f"GET {url} took longer than {timeout_s} s")
    except aiohttp.ClientConnectionError as exc:
        kind = ErrorKind.NOT_ALLOWED if dialguard.is_refusal(exc) else ErrorKind.CONNECT
        snapshot.failed(kind, f"GET {url}: {exc}")
    except aiohttp.ClientError as exc:
        snapshot.failed(ErrorKind.OTHER, f"GET {url}: {type(exc).__name__}: {exc}")
    return None


@dataclass
class PrometheusEndpointProbe:
    """Scrapes a Prometheus text endpoint (Triton's :8002/metrics, vLLM's /metrics, any exporter).

    ``expected`` names are reported ``missing`` when absent; ``TRITON_METRICS`` and ``VLLM_METRICS``
    list the ones the benchmark reads.
    """

    url: str
    expected: Sequence[str] = ()
    name: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        self.name = self.name or self.url

    async def snapshot(self) -> Snapshot:
        snap = Snapshot.now(self.url, "prometheus_text")
        text = await fetch_text(self.url, self.timeout_s, snap)
        if text is None:
            return snap
        try:
            return parse_prometheus_text(text, snap)
        except (ValueError, KeyError, IndexError) as exc:
            return snap.failed(ErrorKind.MALFORMED, f"{self.url}: not Prometheus text: {exc}")

    def delta(self, before: Snapshot, after: Snapshot) -> dict[str, Any]:
        return delta(before, after, self.expected)


def triton_probe(base_url: str, name: str = "triton-metrics") -> PrometheusEndpointProbe:
    """Triton's metrics endpoint (usually port 8002), expecting Triton's metric names."""
    return PrometheusEndpointProbe(base_url.rstrip("/") + "/metrics", TRITON_METRICS, name)


def vllm_probe(base_url: str, name: str = "vllm-metrics") -> PrometheusEndpointProbe:
    """vLLM's /metrics (the OpenAI server's port), expecting vLLM's metric names."""
    return PrometheusEndpointProbe(base_url.rstrip("/") + "/metrics", VLLM_METRICS, name)


def dcgm_probe(metrics_url: str, name: str = "dcgm") -> PrometheusEndpointProbe:
    """The DCGM exporter's metrics (the serving GPUs, one series per GPU), expecting its gauges."""
    return PrometheusEndpointProbe(metrics_url, DCGM_METRICS, name)


@dataclass
class TritonStatsProbe:
    """Triton's statistics extension: cumulative queue and compute times and counts per model."""

    base_url: str
    model: str
    version: str = ""
    name: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        self.name = self.name or f"triton-stats:{self.model}"

    @property
    def url(self) -> str:
        version = f"/versions/{self.version}" if self.version else ""
        return f"{self.base_url.rstrip('/')}/v2/models/{self.model}{version}/stats"

    async def snapshot(self) -> Snapshot:
        snap = Snapshot.now(self.url, "triton_stats")
        text = await fetch_text(self.url, self.timeout_s, snap)
        if text is None:
            return snap
        try:
            return parse_triton_stats(json.loads(text), snap)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            return snap.failed(ErrorKind.MALFORMED, f"{self.url}: {exc}")

    def delta(self, before: Snapshot, after: Snapshot) -> dict[str, Any]:
        out = delta(before, after, (f"triton_stats:{s}_count" for s in ("success", "queue", "compute_infer")))
        if out["status"] == "ok":
            out["stages"] = stage_means(out["metrics"])
        return out


@dataclass(frozen=True)
class PromQuery:
    """One PromQL expression, read as a counter or a gauge (PromQL answers carry no type)."""

    name: str
    promql: str
    type: str = GAUGE

    def __post_init__(self) -> None:
        if self.type not in (COUNTER, GAUGE):
            raise ValueError(f"PromQuery {self.name!r}: type must be 'counter' or 'gauge', got {self.type!r}")


@dataclass
class PrometheusQueryProbe:
    """Reads metrics through a Prometheus server (``prometheus-api-client``'s ``custom_query``).

    Prometheus answers from its last scrape: for an ``after`` snapshot to include the whole level,
    take it at least one scrape interval after the level ends. Series whose value is NaN are left
    out and counted in the snapshot's ``nan_series`` family.
    """

    url: str
    queries: Sequence[PromQuery]
    name: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        self.name = self.name or f"prometheus:{self.url}"
        names = [q.name for q in self.queries]
        if len(set(names)) != len(names):
            raise ValueError(f"PrometheusQueryProbe: query names must be unique, got {names}")

    def _query_all(self) -> list[tuple[PromQuery, list[dict[str, Any]]]]:
        import requests
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        from mcp_bench.dialguard_requests import guard

        # No retries: a snapshot that fails is reported at once, with its kind, not after backoff.
        session = requests.Session()
        session.verify = False
        session.trust_env = False  # no HTTP(S)_PROXY: the policy judges the address dialled
        client = PrometheusConnect(
            url=self.url,
            disable_ssl=True,
            timeout=math.ceil(self.timeout_s),
            retry=Retry(total=0),
            session=session,
        )
        guard(session, self.url, dialguard.active_rule())  # the target policy, per connection
        return [(q, client.custom_query(query=q.promql)) for q in self.queries]

    async def snapshot(self) -> Snapshot:
        import requests
        from prometheus_api_client import PrometheusApiClientException

        snap = Snapshot.now(self.url, "promql")
        try:
            answers = await asyncio.wait_for(asyncio.to_thread(self._query_all), self.timeout_s * 2)
        except TimeoutError:
            return snap.failed(
                ErrorKind.TIMEOUT, f"{self.url}: queries took longer than {self.timeout_s * 2} s"
            )
        except requests.ConnectionError as exc:
            kind = ErrorKind.NOT_ALLOWED if dialguard.REFUSED in str(exc) else ErrorKind.CONNECT
            return snap.failed(kind, f"{self.url}: {exc}")
        except requests.Timeout as exc:
            return snap.failed(ErrorKind.TIMEOUT, f"{self.url}: {exc}")
        except PrometheusApiClientException as exc:
            return snap.failed(ErrorKind.HTTP_STATUS, f"{self.url}: {exc}")
        except (ValueError, KeyError) as exc:
            return snap.failed(ErrorKind.MALFORMED, f"{self.url}: {exc}")
        return _fill_from_vectors(snap, answers)

    def delta(self, before: Snapshot, after: Snapshot) -> dict[str, Any]:
        return delta(before, after, (q.name for q in self.queries))


def _fill_from_vectors(snap: Snapshot, answers: Iterable[tuple[PromQuery, list[dict[str, Any]]]]) -> Snapshot:
    nan_series = 0
    for query, result in answers:
        for item in result:
            value = float(item["value"][1])
            if math.isnan(value):
                nan_series += 1
                continue
            family = snap.families.setdefault(query.name, Family(query.name, query.type))
            family.values[label_key(dict(item.get("metric", {})))] = value
    if nan_series:
        snap.families["nan_series"] = Family("nan_series", GAUGE, {(): float(nan_series)})
    return snap


async def snapshot_all(probes: Sequence[ServerMetricsProbe]) -> list[Snapshot]:
    """Snapshot every probe at once (one level boundary)."""
    return list(await asyncio.gather(*(p.snapshot() for p in probes)))


def deltas(
    probes: Sequence[ServerMetricsProbe], before: Sequence[Snapshot], after: Sequence[Snapshot]
) -> dict[str, dict[str, Any]]:
    """Each probe's delta for one level, keyed by probe name."""
    if not len(probes) == len(before) == len(after):
        raise ValueError("deltas needs one before and one after snapshot per probe")
    return {p.name: p.delta(b, a) for p, b, a in zip(probes, before, after, strict=True)}
