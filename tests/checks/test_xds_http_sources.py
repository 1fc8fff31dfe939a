"""istiod's ``/debug/syncz`` and an Envoy admin endpoint, parsed and fetched from a real aiohttp
server on loopback serving recorded-shape answers. Neither istiod nor Envoy can run here, so
the shapes follow what they document: syncz's ``SyncStatus`` list (``*_sent``/``*_acked``
nonces) and its xDS form (ClientConfig with ``configStatus``); Envoy's ``/config_dump``
(Bootstrap, Clusters, Listeners, Routes, Endpoints dumps) and text ``/stats``.
"""

from __future__ import annotations

import copy
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from mcp_checks.verdict import Verdict
from mcp_checks.xds import (
    SourceAnswer,
    SyncState,
    XdsMemory,
    XdsSource,
    XdsSyncSpec,
    judge,
    parse_envoy_admin,
    parse_syncz,
    run_xds_sync,
)

NOW = 1_800_000_000.0
TYPES = ("CDS", "EDS", "LDS", "RDS")


def sync_status(proxy: str, **overrides: str) -> dict[str, str]:
    entry = {"cluster_id": "Kubernetes", "proxy": proxy, "proxy_type": "sidecar", "istio_version": "1.19.3"}
    for prefix in ("cluster", "listener", "route", "endpoint"):
        entry[f"{prefix}_sent"] = f"{prefix}-nonce-7"
        entry[f"{prefix}_acked"] = f"{prefix}-nonce-7"
    entry.update(overrides)
    return entry


SYNCZ_XDS_FORM = {
    "versionInfo": "2024-01-01T00:00:00Z/42",
    "resources": [
        {
            "@type": "type.googleapis.com/envoy.service.status.v3.ClientConfig",
            "node": {"id": "reviews-v1-7d8b.default", "metadata": {"ISTIO_VERSION": "1.22.0"}},
            "genericXdsConfigs": [
                {
                    "typeUrl": "type.googleapis.com/envoy.config.listener.v3.Listener",
                    "configStatus": "SYNCED",
                },
                {
                    "typeUrl": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                    "configStatus": "SYNCED",
                },
                {
                    "typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                    "configStatus": "ERROR",
                    "errorState": {"details": "cluster outbound|80||x: unsupported lb policy"},
                },
                {
                    "typeUrl": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
                    "configStatus": "NOT_SENT",
                },
            ],
        }
    ],
}


def test_syncz_nonce_rule() -> None:
    doc = [
        sync_status("a.default"),
        sync_status("b.default", cluster_acked="cluster-nonce-6"),
        sync_status("c.default", route_acked=""),
        sync_status("d.default", endpoint_sent="", endpoint_acked=""),
    ]
    answer = parse_syncz(doc, "syncz:x")
    got = {p.proxy_id: {t.xds_type: (t.state, t.detail) for t in p.types} for p in answer.proxies}
    assert set(got["a.default"].values()) == {(SyncState.SYNCED, "SYNCED")}
    assert got["b.default"]["CDS"] == (SyncState.STALE, "STALE")
    assert got["c.default"]["RDS"] == (SyncState.STALE, "STALE (Never Acknowledged)")
    assert got["d.default"]["EDS"] == (SyncState.UNKNOWN, "NOT SENT")


def test_syncz_stale_without_a_time_counts_from_first_seen_or_the_change() -> None:
    answer = parse_syncz([sync_status("b.default", cluster_acked="old")], "syncz:x")
    spec = XdsSyncSpec(sources=(), expected_proxies=("b.default",), grace_s=30)
    first_seen = XdsMemory()
    assert judge(spec, [answer], NOW, first_seen).outcome == Verdict.INCONCLUSIVE  # first seen now
    assert judge(spec, [answer], NOW + 31, first_seen).outcome == Verdict.FAIL  # still, past the grace
    old_change = XdsSyncSpec(sources=(), expected_proxies=("b.default",), grace_s=30, changed_at=NOW - 60)
    assert judge(old_change, [answer], NOW).outcome == Verdict.FAIL  # stale since the change at least
    recent = XdsSyncSpec(sources=(), expected_proxies=("b.default",), grace_s=30, changed_at=NOW - 2)
    assert judge(recent, [answer], NOW).outcome == Verdict.INCONCLUSIVE  # not converged yet


def test_syncz_xds_form_error_is_a_nack() -> None:
    answer = parse_syncz(SYNCZ_XDS_FORM, "syncz:x")
    outcome = judge(XdsSyncSpec(sources=(), types=("LDS", "RDS", "CDS")), [answer], NOW)
    assert outcome.outcome == Verdict.FAIL
    assert outcome.reason == "ProxyNacked"
    assert "unsupported lb policy" in outcome.message


@pytest.mark.parametrize(
    "doc",
    [{"unexpected": 1}, [{"no": "proxy"}], [sync_status("a", cluster_sent=7)], {"resources": [3]}, "text"],
)
def test_syncz_malformed_is_error(doc: Any) -> None:
    answer = parse_syncz(doc, "syncz:x")
    assert answer.malformed
    assert judge(XdsSyncSpec(sources=()), [answer], NOW).outcome == Verdict.ERROR


def test_syncz_empty_list_knows_no_proxy() -> None:
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a",)), [parse_syncz([], "syncz:x")], NOW)
    assert outcome.outcome == Verdict.FAIL
    assert outcome.reason == "ProxyMissing"


def _dump(
    node: str = "sidecar~10.0.0.1~a.default~default.svc.cluster.local", version: str = "v7"
) -> dict[str, Any]:
    updated = "2027-01-15T08:00:00.123Z"
    return {
        "configs": [
            {
                "@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
                "bootstrap": {"node": {"id": node, "cluster": "a.default"}},
                "last_updated": updated,
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
                "version_info": version,
                "static_clusters": [{"cluster": {"name": "xds-grpc"}, "last_updated": updated}],
                "dynamic_active_clusters": [
                    {"version_info": version, "cluster": {"name": "outbound|80||x"}, "last_updated": updated}
                ],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
                "version_info": version,
                "dynamic_listeners": [
                    {
                        "name": "0.0.0.0_80",
                        "active_state": {"version_info": version, "listener": {}, "last_updated": updated},
                    }
                ],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump",
                "dynamic_route_configs": [
                    {"version_info": version, "route_config": {}, "last_updated": updated}
                ],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
                "dynamic_endpoint_configs": [
                    {"version_info": version, "endpoint_config": {}, "last_updated": updated}
                ],
            },
        ]
    }


STATS = "\n".join(
    [
        "cluster_manager.cds.update_success: 7",
        "cluster_manager.cds.update_rejected: 0",
        'cluster_manager.cds.version_text: "v7"',
        "listener_manager.lds.update_success: 7",
        "listener_manager.lds.update_rejected: 0",
        "control_plane.connected_state: 1",
        "cluster.outbound|80||x.update_rejected: 0",
        "http.outbound_0.0.0.0_80.rds.80.update_rejected: 0",
        "cluster.outbound|80||x.upstream_cx_length_ms: P0(nan,1) P25(nan,2)",
    ]
)
NODE = "sidecar~10.0.0.1~a.default~default.svc.cluster.local"


def _types(answer: Any) -> dict[str, Any]:
    return {t.xds_type: t for t in answer.proxies[0].types}


def test_envoy_admin_synced() -> None:
    answer = parse_envoy_admin(_dump(), STATS, "envoy_admin:x")
    assert answer.proxies[0].proxy_id == NODE
    assert {t: s.state for t, s in _types(answer).items()} == dict.fromkeys(TYPES, SyncState.SYNCED)
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=(NODE,), expected_version="v7"), [answer], NOW)
    assert outcome.outcome == Verdict.PASS


def test_envoy_admin_listener_error_state_is_a_nack() -> None:
    dump = _dump()
    dump["configs"][2]["dynamic_listeners"][0]["error_state"] = {
        "details": "error adding listener '0.0.0.0:80': no filters",
        "last_update_attempt": "2027-01-15T08:00:05Z",
        "version_info": "v8",
    }
    answer = parse_envoy_admin(dump, STATS, "envoy_admin:x")
    assert _types(answer)["LDS"].state == SyncState.REJECTED
    outcome = judge(XdsSyncSpec(sources=()), [answer], NOW)
    assert outcome.reason == "ProxyNacked"
    assert "no filters" in outcome.message


def test_envoy_admin_rejected_counter_behind_expected_version_is_a_nack() -> None:
    stats = STATS.replace("cluster_manager.cds.update_rejected: 0", "cluster_manager.cds.update_rejected: 2")
    answer = parse_envoy_admin(_dump(), stats, "envoy_admin:x")
    outcome = judge(XdsSyncSpec(sources=(), expected_version="v8", changed_at=NOW - 1), [answer], NOW)
    assert {f.subject: f.reason for f in outcome.findings}[f"{NODE}/CDS"] == "ProxyNacked"
    assert "2 updates rejected" in outcome.message


def test_envoy_admin_warming_and_disconnected_are_stale() -> None:
    dump = _dump()
    dump["configs"][1]["dynamic_warming_clusters"] = [
        {"version_info": "v8", "cluster": {"name": "new"}, "last_updated": "2027-01-15T08:00:00Z"}
    ]
    stats = STATS.replace("control_plane.connected_state: 1", "control_plane.connected_state: 0")
    types = _types(parse_envoy_admin(dump, stats, "envoy_admin:x"))
    assert (types["CDS"].state, types["CDS"].detail) == (SyncState.STALE, "warming")
    assert types["LDS"].state == SyncState.STALE
    assert "connected_state=0" in types["LDS"].detail


@pytest.mark.parametrize(
    "dump",
    [{}, {"configs": {}}, {"configs": []}, {"configs": [{"@type": "x"}]}, "text"],
)
def test_envoy_admin_malformed_is_error(dump: Any) -> None:
    answer = parse_envoy_admin(dump, STATS, "envoy_admin:x")
    assert answer.malformed
    assert judge(XdsSyncSpec(sources=()), [answer], NOW).outcome == Verdict.ERROR


def test_envoy_admin_without_eds_dump_leaves_eds_not_reported() -> None:
    dump = copy.deepcopy(_dump())
    del dump["configs"][4]
    spec = XdsSyncSpec(sources=(), min_proxies=1)
    outcome = judge(spec, [parse_envoy_admin(dump, STATS, "envoy_admin:x")], NOW)
    assert outcome.outcome == Verdict.INCONCLUSIVE
    assert outcome.findings[0].reason == "TypeNotReported"


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A real HTTP server answering /debug/syncz, /config_dump and /stats with what ``state`` holds."""
    state: dict[str, Any] = {"syncz": "[]", "dump": "{}", "stats": STATS}

    def serve(key: str) -> Any:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=state[key], content_type="application/json")

        return handler

    app = web.Application()
    app.router.add_get("/debug/syncz", serve("syncz"))
    app.router.add_get("/config_dump", serve("dump"))
    app.router.add_get("/stats", serve("stats"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", state
    await runner.cleanup()


async def test_fetch_syncz_and_envoy_admin_over_http(recorded: tuple[str, dict[str, Any]]) -> None:
    base, state = recorded
    state["syncz"] = json.dumps([sync_status("a.default"), sync_status(NODE)])
    state["dump"] = json.dumps(_dump())
    spec = XdsSyncSpec(
        sources=(XdsSource("syncz", base), XdsSource("envoy_admin", base)),
        expected_proxies=("a.default", NODE),
        timeout_s=3,
    )
    outcome = await run_xds_sync(spec)
    assert outcome.outcome == Verdict.PASS, outcome.message
    state["syncz"] = "<html>not json"
    broken = await run_xds_sync(spec)
    assert broken.outcome == Verdict.ERROR
    assert broken.reason == "MalformedAnswer"
    assert f"syncz:{base}" in broken.source


async def test_http_sources_unreachable_are_inconclusive() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    spec = XdsSyncSpec(sources=(XdsSource("syncz", base), XdsSource("envoy_admin", base)), timeout_s=1)
    outcome = await run_xds_sync(spec)
    assert outcome.outcome == Verdict.INCONCLUSIVE
    assert outcome.reason == "SourceUnreachable"
    assert {f.source for f in outcome.findings} == {f"syncz:{base}", f"envoy_admin:{base}"}


def test_one_source_down_while_another_answers_is_inconclusive() -> None:
    """Three clients' own CSDS, one killed: what it would say is unknown, so the gate must not be
    Ready on the other two (it was Warn, score 0, Ready True, exit 0)."""
    up = parse_syncz([sync_status("a.default")], "syncz:up")
    down = SourceAnswer("csds:down", unreachable="UNAVAILABLE: connection refused")
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a.default",)), [up, down], NOW)
    assert outcome.outcome == Verdict.INCONCLUSIVE
    assert outcome.reason == "SourceUnreachable" and "csds:down" in outcome.message
