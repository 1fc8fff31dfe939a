"""CSDS answers -> per-proxy, per-type states, and the fetch against a real grpc.aio CSDS
server on loopback (built responses; the real xDS clients are in e2e/test_xds.py)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from envoy.admin.v3 import config_dump_shared_pb2 as shared
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc

from mcp_checks.verdict import Verdict
from mcp_checks.xds import (
    SyncState,
    XdsMemory,
    XdsSource,
    XdsSyncSpec,
    judge,
    parse_client_status,
    run_xds_sync,
)
from mcp_checks.xds.model import TYPE_URLS

URL = {short: url for url, short in TYPE_URLS.items()}
NOW = 1_800_000_000.0


def generic(
    xds_type: str,
    *,
    config: int = csds_pb2.SYNCED,
    client: int = shared.ACKED,
    version: str = "v1",
    error: str = "",
    updated: float | None = None,
    name: str = "r",
) -> Any:
    item = csds_pb2.ClientConfig.GenericXdsConfig(
        type_url=URL[xds_type], name=name, version_info=version, config_status=config, client_status=client
    )
    if error:
        item.error_state.details = error
        item.error_state.version_info = "v2"
    if updated is not None:
        item.last_updated.FromNanoseconds(int(updated * 1e9))
    return item


def response(*nodes: tuple[str, list[Any]]) -> Any:
    resp = csds_pb2.ClientStatusResponse()
    for node_id, items in nodes:
        cfg = resp.config.add()
        cfg.node.id = node_id
        cfg.generic_xds_configs.extend(items)
    return resp


def all_types(**kwargs: Any) -> list[Any]:
    return [generic(t, **kwargs) for t in ("LDS", "RDS", "CDS", "EDS")]


def states(answer: Any) -> dict[str, dict[str, SyncState]]:
    return {p.proxy_id: {t.xds_type: t.state for t in p.types} for p in answer.proxies}


def test_acked_everywhere_is_synced_and_passes() -> None:
    answer = parse_client_status(response(("a", all_types()), ("b", all_types())), "csds:x")
    assert states(answer) == {n: dict.fromkeys(("CDS", "EDS", "LDS", "RDS"), SyncState.SYNCED) for n in "ab"}
    outcome = judge(
        XdsSyncSpec(sources=(), expected_proxies=("a", "b"), expected_version="v1"), [answer], NOW
    )
    assert outcome.outcome == Verdict.PASS
    assert outcome.reason == "ProxiesSynced"
    assert outcome.observed["synced"] == "8"


def test_nack_is_rejected_with_the_clients_error_text() -> None:
    items = [
        *all_types()[:2],
        generic("CDS", client=shared.NACKED, error="ChoiceCount must be >= 2"),
        all_types()[3],
    ]
    answer = parse_client_status(response(("a", items)), "csds:x")
    cds = next(t for t in answer.proxies[0].types if t.xds_type == "CDS")
    assert cds.state == SyncState.REJECTED
    assert cds.detail == "ChoiceCount must be >= 2"
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a",)), [answer], NOW)
    assert outcome.outcome == Verdict.FAIL
    assert outcome.reason == "ProxyNacked"
    assert "ChoiceCount must be >= 2" in outcome.message
    assert outcome.findings[0].subject == "a/CDS"
    assert outcome.findings[0].source == "csds:x"


def test_management_server_error_status_is_a_rejection() -> None:
    answer = parse_client_status(
        response(("a", [generic("LDS", config=csds_pb2.ERROR, client=shared.UNKNOWN, error="bad listener")])),
        "csds:x",
    )
    assert answer.proxies[0].types[0].state == SyncState.REJECTED


def test_two_resources_of_one_type_take_the_worst() -> None:
    items = [generic("EDS", name="e1"), generic("EDS", name="e2", client=shared.REQUESTED)]
    answer = parse_client_status(response(("a", items)), "csds:x")
    assert answer.proxies[0].types[0].state == SyncState.STALE
    assert answer.proxies[0].types[0].detail == "REQUESTED"


def test_stale_within_grace_is_not_converged_yet_and_after_grace_fails() -> None:
    """Not converged yet is no evidence of readiness: Inconclusive (it was a Warn, and Ready)."""
    items = all_types(config=csds_pb2.STALE, client=shared.UNKNOWN, updated=NOW - 5)
    answer = parse_client_status(response(("a", items)), "csds:x")
    young = judge(XdsSyncSpec(sources=(), expected_proxies=("a",), grace_s=10), [answer], NOW)
    assert young.outcome == Verdict.INCONCLUSIVE
    assert young.reason == "ProxyStale" and "not converged yet: stale 5.0s" in young.message
    assert young.findings[0].threshold == "stale < 10s"
    fail = judge(XdsSyncSpec(sources=(), expected_proxies=("a",), grace_s=3), [answer], NOW)
    assert fail.outcome == Verdict.FAIL
    assert "stale 5.0s" in fail.message


def test_acked_on_an_old_version_is_stale_from_the_change() -> None:
    answer = parse_client_status(response(("a", all_types(version="v1", updated=NOW - 3600))), "csds:x")
    spec = XdsSyncSpec(
        sources=(), expected_proxies=("a",), expected_version="v2", changed_at=NOW - 1, grace_s=5
    )
    outcome = judge(spec, [answer], NOW)
    assert outcome.outcome == Verdict.INCONCLUSIVE
    assert "expected v2" in outcome.message


def test_does_not_exist_fails_and_unknown_types_are_inconclusive() -> None:
    items = [
        generic("LDS", client=shared.DOES_NOT_EXIST, config=csds_pb2.UNKNOWN),
        generic("RDS", config=csds_pb2.NOT_SENT, client=shared.UNKNOWN),
        generic("CDS"),
    ]
    answer = parse_client_status(response(("a", items)), "csds:x")
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a",)), [answer], NOW)
    reasons = {f.subject: f.reason for f in outcome.findings}
    assert reasons == {
        "a/LDS": "ResourceDoesNotExist",
        "a/RDS": "TypeNotReported",
        "a/EDS": "TypeNotReported",
    }
    assert outcome.outcome == Verdict.FAIL


def test_expected_but_unknown_and_known_but_not_expected() -> None:
    answer = parse_client_status(response(("a", all_types()), ("stray", all_types())), "csds:x")
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a", "gone")), [answer], NOW)
    reasons = {f.subject: (f.reason, f.outcome) for f in outcome.findings}
    assert reasons["gone"] == ("ProxyMissing", Verdict.FAIL)
    assert reasons["stray"] == ("ProxyNotInCluster", Verdict.WARN)
    assert outcome.outcome == Verdict.FAIL


def test_empty_answer_is_never_a_pass() -> None:
    answer = parse_client_status(csds_pb2.ClientStatusResponse(), "csds:x")
    assert answer.answered and answer.proxies == ()
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a",)), [answer], NOW)
    assert outcome.outcome == Verdict.FAIL
    assert outcome.reason == "ProxyMissing"
    nothing_selected = judge(XdsSyncSpec(sources=(), expected_proxies=()), [answer], NOW)
    assert nothing_selected.outcome == Verdict.INCONCLUSIVE
    assert nothing_selected.reason == "NoProxiesSelected"


def test_malformed_answers_are_errors() -> None:
    no_node = csds_pb2.ClientStatusResponse()
    no_node.config.add().generic_xds_configs.append(generic("LDS"))
    for raw in (no_node, {"config": []}):
        answer = parse_client_status(raw, "csds:x")
        assert answer.malformed
        outcome = judge(XdsSyncSpec(sources=()), [answer], NOW)
        assert outcome.outcome == Verdict.ERROR
        assert outcome.reason == "MalformedAnswer"


def test_no_sources_is_inconclusive() -> None:
    outcome = judge(XdsSyncSpec(sources=()), [], NOW)
    assert outcome.outcome == Verdict.INCONCLUSIVE
    assert outcome.reason == "NoSources"


class _Csds(csds_pb2_grpc.ClientStatusDiscoveryServiceServicer):  # type: ignore[misc]
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def FetchClientStatus(self, request: Any, context: Any) -> Any:
        return self.answer


@pytest.fixture
async def csds_server() -> AsyncIterator[str]:
    server = grpc.aio.server()
    csds_pb2_grpc.add_ClientStatusDiscoveryServiceServicer_to_server(
        _Csds(response(("a", all_types()), ("b", all_types()))), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


async def test_run_against_a_real_grpc_server(csds_server: str) -> None:
    spec = XdsSyncSpec(sources=(XdsSource("csds", csds_server),), expected_proxies=("a", "b"), timeout_s=3)
    outcome = await run_xds_sync(spec)
    assert outcome.outcome == Verdict.PASS, outcome.message
    assert outcome.source == f"csds:{csds_server}"


async def test_unreachable_csds_is_inconclusive_naming_the_source() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = XdsSyncSpec(
        sources=(XdsSource("csds", f"127.0.0.1:{port}"),), expected_proxies=("a",), timeout_s=1
    )
    outcome = await run_xds_sync(spec)
    assert outcome.outcome == Verdict.INCONCLUSIVE
    assert outcome.reason == "SourceUnreachable"
    assert f"127.0.0.1:{port}" in outcome.message


def test_a_zero_timestamp_is_an_unknown_age_counted_from_first_seen() -> None:
    """grpc-go reports a REQUESTED resource with Go's zero time (year 1): that is no age at all,
    not 63.9 billion seconds, so it is counted from the first time the check saw it stale."""
    items = all_types(config=csds_pb2.UNKNOWN, client=shared.REQUESTED)
    for item in items:
        item.last_updated.seconds = -62135596800  # 0001-01-01T00:00:00Z
    answer = parse_client_status(response(("a", items)), "csds:x")
    assert {t.since for t in answer.proxies[0].types} == {None}
    spec = XdsSyncSpec(sources=(), expected_proxies=("a",), grace_s=30)
    first = judge(spec, [answer], NOW)
    assert first.outcome == Verdict.INCONCLUSIVE, first.message
    assert "stale 0.0s (since unknown" in first.message, first.message
    seen = XdsMemory(stale_since={f"a/{t}": NOW - 40 for t in ("LDS", "RDS", "CDS", "EDS")})
    later = judge(spec, [answer], NOW, seen)  # first seen 40 s ago
    assert later.outcome == Verdict.FAIL and "stale 40.0s" in later.message, later.message


def test_a_nack_comes_before_the_staleness_it_leaves_behind() -> None:
    """With expectedVersion, six proxies still on v1 past the grace and one that NACKed v2: the
    NACK is the reason and the first finding, however the proxies sort."""
    stale = [(f"node-{i}", all_types(version="v1", updated=NOW - 3600)) for i in (1, 3, 4, 5, 6, 7)]
    nacked = all_types(version="v1", updated=NOW - 3600)
    nacked[2] = generic("CDS", client=shared.NACKED, error="ChoiceCount must be >= 2", version="v1")
    answer = parse_client_status(response(*stale[:1], ("node-2", nacked), *stale[1:]), "csds:x")
    spec = XdsSyncSpec(sources=(), expected_version="v2", grace_s=5)
    outcome = judge(spec, [answer], NOW)
    assert outcome.outcome == Verdict.FAIL
    assert outcome.reason == "ProxyNacked" and outcome.findings[0].subject == "node-2/CDS"
    assert outcome.message.startswith("node-2/CDS: NACKed"), outcome.message


def test_first_seen_is_forgotten_once_synced() -> None:
    items = all_types(config=csds_pb2.UNKNOWN, client=shared.REQUESTED)
    spec = XdsSyncSpec(sources=(), expected_proxies=("a",), grace_s=30)
    seen = XdsMemory()
    judge(spec, [parse_client_status(response(("a", items)), "csds:x")], NOW, seen)
    assert set(seen.stale_since) == {"a/LDS", "a/RDS", "a/CDS", "a/EDS"}
    judge(spec, [parse_client_status(response(("a", all_types())), "csds:x")], NOW + 1, seen)
    assert seen.stale_since == {}  # synced again: a later staleness starts its own count


def test_a_proxy_that_disappears_fails_the_check_until_it_is_back() -> None:
    """Three clients known to the control plane, one killed: the control plane's CSDS lists two.
    With no proxies named, the dead one must not silently leave the judged set."""
    spec = XdsSyncSpec(sources=(), min_proxies=2, grace_s=30)
    memory = XdsMemory()
    three = parse_client_status(response(*[(n, all_types()) for n in ("a", "b", "c")]), "csds:cp")
    two = parse_client_status(response(*[(n, all_types()) for n in ("a", "c")]), "csds:cp")
    assert judge(spec, [three], NOW, memory).outcome == Verdict.PASS
    gone = judge(spec, [two], NOW + 5, memory)
    assert (gone.outcome, gone.reason) == (Verdict.FAIL, "ProxyDisappeared"), gone.message
    assert gone.findings[0].subject == "b" and "reported 5.0s ago" in gone.findings[0].observed
    assert judge(spec, [two], NOW + 60, memory).outcome == Verdict.FAIL  # not forgiven by time
    assert judge(spec, [three], NOW + 61, memory).outcome == Verdict.PASS  # back: fine again
    named = XdsSyncSpec(sources=(), expected_proxies=("a", "c"), grace_s=30)
    assert judge(named, [two], NOW + 62, memory).outcome == Verdict.PASS  # a selector let it go
    assert judge(spec, [two], NOW).outcome == Verdict.PASS  # a first look cannot know


def test_a_selected_proxy_seen_before_and_gone_now_has_disappeared() -> None:
    """The workload's pods name who should be there: one whose proxy an earlier look saw and no
    source reports now is ProxyDisappeared; one never seen is unknown to the control plane.
    Dropping the memory (a restart without the status) would turn the first into the second."""
    spec = XdsSyncSpec(sources=(), expected_proxies=("a", "b"), grace_s=30)
    memory = XdsMemory()
    both = parse_client_status(response(("a", all_types()), ("b", all_types())), "csds:cp")
    one = parse_client_status(response(("a", all_types())), "csds:cp")
    assert judge(spec, [both], NOW, memory).outcome == Verdict.PASS
    gone = judge(spec, [one], NOW + 3, XdsMemory.from_wire(memory.to_wire()))  # kept in status
    assert (gone.outcome, gone.reason, gone.findings[0].subject) == (Verdict.FAIL, "ProxyDisappeared", "b")
    never = judge(spec, [one], NOW + 3)
    assert (never.outcome, never.reason) == (Verdict.FAIL, "ProxyMissing")


def _cli(*argv: str) -> tuple[int, dict[str, Any]]:
    import contextlib
    import io
    import json

    from mcp_checks.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["xds", *argv, "--json"])
    return code, json.loads(out.getvalue())


async def test_mcp_check_xds_wait_converges_or_says_it_did_not(csds_server: str) -> None:
    """A CI caller waits for convergence: exit 0 once every proxy ACKed the expected version;
    a version never published is Inconclusive after the wait (exit 3), never a Warn and exit 0.
    (The CLI runs its own event loop, in a thread: the server serves on the test's.)"""
    csds = ("--csds", csds_server, "--proxy", "a", "--proxy", "b")
    code, data = await asyncio.to_thread(_cli, *csds, "--expected-version", "v1", "--wait", "5s")
    assert code == 0 and data["checks"][0]["reason"] == "ProxiesSynced", data
    waited = ("--expected-version", "v9", "--wait", "1.5s", "--grace-seconds", "60")
    code, data = await asyncio.to_thread(_cli, *csds, *waited)
    assert code == 3, data
    row = data["checks"][0]
    assert (row["outcome"], row["reason"]) == ("Inconclusive", "ConvergenceTimeout"), row
    assert "not converged after" in row["message"]
    code, data = await asyncio.to_thread(_cli, *csds, "--expected-version", "v9")  # one look
    assert code == 3 and data["checks"][0]["reason"] == "ProxyStale", data


@pytest.mark.parametrize("wait", ["0", "-5", "soon"])
def test_mcp_check_xds_wait_must_be_a_positive_duration(
    wait: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mcp_checks.cli import main

    with pytest.raises(SystemExit) as info:
        main(["xds", "--csds", "127.0.0.1:1", "--wait", wait])
    assert info.value.code == 2 and "--wait" in capsys.readouterr().err


async def test_a_proxy_in_the_environment_is_not_used(
    csds_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CSDS channel dials the source itself, never through grpc_proxy or http(s)_proxy: the
    target policy judges the address dialled (issue 35, item 5)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for var in ("grpc_proxy", "https_proxy", "http_proxy", "HTTPS_PROXY", "HTTP_PROXY"):
        monkeypatch.setenv(var, proxy)
    for var in ("no_grpc_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    spec = XdsSyncSpec(sources=(XdsSource("csds", csds_server),), expected_proxies=("a", "b"), timeout_s=3)
    outcome = await run_xds_sync(spec)
    assert outcome.outcome == Verdict.PASS, outcome.message
