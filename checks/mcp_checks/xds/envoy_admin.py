"""An Envoy admin endpoint: the proxy's own view. ``/config_dump?include_eds`` gives each
type's version, last update, warming state and the last rejected update (``error_state``);
``/stats`` gives ``control_plane.connected_state`` and the ``update_rejected`` counters, which
turn "not on the expected version" into "rejected". Tests serve recorded-shape data from a
real HTTP server: Envoy itself cannot run here.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from mcp_checks.xds.csds import merge_types
from mcp_checks.xds.model import MalformedAnswer, ProxyReport, SourceAnswer, SyncState, TypeStatus, XdsSource
from mcp_common import rfc3339

_DUMP = "type.googleapis.com/envoy.admin.v3."
REJECT_COUNTERS = {
    "CDS": "cluster_manager.cds.update_rejected",
    "LDS": "listener_manager.lds.update_rejected",
    "RDS": "http.rds.update_rejected",  # summed over every route config's rds.<name>.update_rejected
    "EDS": "cluster.eds.update_rejected",  # summed over cluster.<name>.update_rejected
}


def parse_stats(text: str) -> dict[str, float]:
    """Envoy's text ``/stats`` (``name: value``); text readouts and histograms are skipped."""
    stats: dict[str, float] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if not sep:
            continue
        try:
            stats[name.strip()] = float(value)
        except ValueError:
            continue
    return stats


def _rejections(stats: dict[str, float], xds_type: str) -> int:
    if xds_type == "CDS":
        return int(stats.get(REJECT_COUNTERS["CDS"], 0))
    if xds_type == "LDS":
        return int(stats.get(REJECT_COUNTERS["LDS"], 0))
    if xds_type == "RDS":
        return int(
            sum(
                v
                for k, v in stats.items()
                if k.startswith("http.") and ".rds." in k and k.endswith(".update_rejected")
            )
        )
    return int(
        sum(v for k, v in stats.items() if k.startswith("cluster.") and k.endswith(".update_rejected"))
    )


def _time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return rfc3339.parse(value, zone_required=False).timestamp()
    except ValueError:
        return None


def _entry(xds_type: str, record: Any, body_key: str) -> TypeStatus:
    """One dynamic resource: active, warming, or with a failed last update."""
    if not isinstance(record, dict):
        raise MalformedAnswer(f"{xds_type}: a dynamic resource is not an object")
    error = record.get("error_state")
    if isinstance(error, dict) and error:
        since = _time(error.get("last_update_attempt"))
        return TypeStatus(
            xds_type,
            SyncState.REJECTED,
            str(error.get("version_info", "")),
            since,
            str(error.get("details") or "update rejected"),
        )
    if isinstance(record.get("warming_state"), dict):
        warm = record["warming_state"]
        return TypeStatus(
            xds_type,
            SyncState.STALE,
            str(warm.get("version_info", "")),
            _time(warm.get("last_updated")),
            "warming",
        )
    active = record.get("active_state", record)
    if body_key and body_key not in active:
        raise MalformedAnswer(f"{xds_type}: a dynamic resource without {body_key}")
    return TypeStatus(
        xds_type,
        SyncState.SYNCED,
        str(active.get("version_info", "")),
        _time(active.get("last_updated")),
        "active",
    )


# dump type -> (xDS type, lists of dynamic resources and whether they are warming, body key)
_SECTIONS = {
    "ClustersConfigDump": (
        "CDS",
        (("dynamic_active_clusters", False), ("dynamic_warming_clusters", True)),
        "cluster",
    ),
    "ListenersConfigDump": ("LDS", (("dynamic_listeners", False),), ""),
    "RoutesConfigDump": ("RDS", (("dynamic_route_configs", False),), "route_config"),
    "EndpointsConfigDump": ("EDS", (("dynamic_endpoint_configs", False),), "endpoint_config"),
}


def _node_id(configs: list[Any]) -> str:
    for cfg in configs:
        if isinstance(cfg, dict) and cfg.get("@type") == _DUMP + "BootstrapConfigDump":
            node_id = cfg.get("bootstrap", {}).get("node", {}).get("id")
            if isinstance(node_id, str) and node_id:
                return node_id
    raise MalformedAnswer("config_dump has no BootstrapConfigDump with a node id")


def parse_envoy_admin(config_dump: Any, stats_text: str, source: str) -> SourceAnswer:
    """``/config_dump`` JSON and ``/stats`` text of one Envoy -> the answer for its node; pure."""
    try:
        configs = config_dump.get("configs") if isinstance(config_dump, dict) else None
        if not isinstance(configs, list):
            raise MalformedAnswer("config_dump has no configs list")
        node_id = _node_id(configs)
        stats = parse_stats(stats_text)
        connected = stats.get("control_plane.connected_state")
        statuses: list[TypeStatus] = []
        for cfg in configs:
            section = (
                _SECTIONS.get(str(cfg.get("@type", "")).removeprefix(_DUMP))
                if isinstance(cfg, dict)
                else None
            )
            if section is None:
                continue
            xds_type, lists, body_key = section
            for key, warming in lists:
                records = cfg.get(key, [])
                if not isinstance(records, list):
                    raise MalformedAnswer(f"{key} is not a list")
                for record in records:
                    status = _entry(xds_type, {"warming_state": record} if warming else record, body_key)
                    statuses.append(status)
        merged = []
        for status in merge_types(statuses):
            rejected = _rejections(stats, status.xds_type)
            detail = status.detail
            state = status.state
            if connected == 0 and state == SyncState.SYNCED:
                state, detail = SyncState.STALE, "disconnected (control_plane.connected_state=0)"
            merged.append(
                TypeStatus(status.xds_type, state, status.version, status.since, detail, rejections=rejected)
            )
    except MalformedAnswer as exc:
        return SourceAnswer(source, malformed=str(exc))
    return SourceAnswer(source, (ProxyReport(node_id, tuple(merged)),))


async def fetch_envoy_admin(
    source: XdsSource, session: aiohttp.ClientSession, timeout_s: float
) -> SourceAnswer:
    base = source.address.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def get(path: str) -> str:
        async with session.get(base + path, timeout=timeout) as resp:
            if resp.status != 200:
                raise aiohttp.ClientResponseError(
                    resp.request_info, (), status=resp.status, message=f"HTTP {resp.status} for {path}"
                )
            return await resp.text()

    try:
        dump_text, stats_text = await asyncio.gather(get("/config_dump?include_eds"), get("/stats"))
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return SourceAnswer(source.label, unreachable=f"{type(exc).__name__}: {exc}")
    try:
        dump = json.loads(dump_text)
    except ValueError as exc:
        return SourceAnswer(source.label, malformed=f"config_dump is not JSON: {exc}")
    return parse_envoy_admin(dump, stats_text, source.label)
