"""istiod's ``/debug/syncz``: the control plane's view of every connected proxy.

Two recorded shapes are read. The JSON list of ``SyncStatus`` (``proxy``, ``cluster_sent``,
``cluster_acked``, ``listener_*``, ``route_*``, ``endpoint_*``) is judged by the rule
``istioctl proxy-status`` applies: nothing sent is NOT SENT, acked nonce == sent nonce is
SYNCED, anything else STALE. The xDS form (a DiscoveryResponse whose resources are
``envoy.service.status.v3.ClientConfig``) carries ``configStatus`` SYNCED / NOT_SENT / STALE /
ERROR per type and is read like CSDS. Tests serve these shapes from a real HTTP server:
istiod itself cannot run here.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from mcp_checks.xds.csds import messages, proxy_from_client_config
from mcp_checks.xds.model import MalformedAnswer, ProxyReport, SourceAnswer, SyncState, TypeStatus, XdsSource

LEGACY_FIELDS = {"LDS": "listener", "RDS": "route", "CDS": "cluster", "EDS": "endpoint"}


def nonce_state(sent: str, acked: str) -> tuple[SyncState, str]:
    """istioctl proxy-status's rule for one type."""
    if not sent:
        return SyncState.UNKNOWN, "NOT SENT"
    if sent == acked:
        return SyncState.SYNCED, "SYNCED"
    if not acked:
        return SyncState.STALE, "STALE (Never Acknowledged)"
    return SyncState.STALE, "STALE"


def _legacy_proxy(entry: Any) -> ProxyReport:
    if not isinstance(entry, dict) or not isinstance(entry.get("proxy"), str) or not entry["proxy"]:
        raise MalformedAnswer("a syncz entry without a proxy name")
    statuses = []
    for xds_type, prefix in LEGACY_FIELDS.items():
        sent, acked = entry.get(f"{prefix}_sent", ""), entry.get(f"{prefix}_acked", "")
        if not isinstance(sent, str) or not isinstance(acked, str):
            raise MalformedAnswer(f"{entry['proxy']}: {prefix}_sent/{prefix}_acked are not strings")
        state, detail = nonce_state(sent, acked)
        statuses.append(TypeStatus(xds_type, state, detail=detail))
    return ProxyReport(entry["proxy"], tuple(sorted(statuses, key=lambda s: s.xds_type)))


def _xds_form_proxy(resource: Any) -> ProxyReport:
    if not isinstance(resource, dict):
        raise MalformedAnswer("a syncz resource is not an object")
    from google.protobuf import json_format  # with the messages: loaded by the first round that reads

    body = {k: v for k, v in resource.items() if k != "@type"}
    try:
        config = json_format.ParseDict(body, messages().ClientConfig(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise MalformedAnswer(f"a syncz ClientConfig does not parse: {exc}") from exc
    return proxy_from_client_config(config)


def parse_syncz(document: Any, source: str) -> SourceAnswer:
    """The decoded JSON of ``/debug/syncz`` -> the answer; pure."""
    try:
        if isinstance(document, list):
            proxies = tuple(_legacy_proxy(e) for e in document)
        elif isinstance(document, dict) and isinstance(document.get("resources"), list):
            proxies = tuple(_xds_form_proxy(r) for r in document["resources"])
        else:
            raise MalformedAnswer(
                f"syncz is neither a list nor a DiscoveryResponse: {type(document).__name__}"
            )
    except MalformedAnswer as exc:
        return SourceAnswer(source, malformed=str(exc))
    return SourceAnswer(source, proxies)


async def fetch_syncz(source: XdsSource, session: aiohttp.ClientSession, timeout_s: float) -> SourceAnswer:
    url = source.address.rstrip("/") + "/debug/syncz"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return SourceAnswer(source.label, unreachable=f"HTTP {resp.status}")
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return SourceAnswer(source.label, unreachable=f"{type(exc).__name__}: {exc}")
    try:
        document = json.loads(text)
    except ValueError as exc:
        return SourceAnswer(source.label, malformed=f"not JSON: {exc}")
    return parse_syncz(document, source.label)
