"""No Pass on empty evidence in the xDS check: who should be there comes from the spec (named
proxies, the workload's pods, minProxies), never from the answer judged; zero proxies, a version
nobody reported and a change just published are not convergence; hostile answers are cut and
named. Against built CSDS answers, and through ``mcp-check xds`` against a real grpc.aio server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
from envoy.admin.v3 import config_dump_shared_pb2 as shared
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc
from tests.checks.test_xds_csds import NOW, _Csds, all_types, generic, response

from mcp_checks.verdict import Verdict
from mcp_checks.xds import XdsMemory, XdsSyncSpec, judge, parse_client_status
from mcp_checks.xds.csds import decode_client_status
from mcp_checks.xds.model import MAX_TEXT

NONE = parse_client_status(response(), "csds:cp")
TWO = parse_client_status(response(("a", all_types()), ("b", all_types())), "csds:cp")


def test_a_source_reporting_no_proxy_is_inconclusive() -> None:
    outcome = judge(XdsSyncSpec(sources=()), [NONE], NOW)
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "NoProxiesReported")
    versioned = judge(XdsSyncSpec(sources=(), expected_version="v2"), [NONE], NOW)
    assert versioned.outcome == Verdict.INCONCLUSIVE


def test_min_proxies_zero_lets_none_pass_and_above_zero_fails_none() -> None:
    assert judge(XdsSyncSpec(sources=(), min_proxies=0), [NONE], NOW).outcome == Verdict.PASS
    short = judge(XdsSyncSpec(sources=(), min_proxies=1), [NONE], NOW)
    assert (short.outcome, short.reason) == (Verdict.FAIL, "TooFewProxies")
    assert "0 proxies reported, at least 1 required" in short.message


def test_proxies_reported_with_nothing_expected_cannot_pass() -> None:
    """One look, no proxies named, a client dead behind the control plane: what is left looks
    synced, and nothing but the answer itself says so."""
    outcome = judge(XdsSyncSpec(sources=()), [TWO], NOW)
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "NoExpectedProxies")
    assert "--min-proxies" in outcome.message


@pytest.mark.parametrize(("minimum", "verdict"), [(1, Verdict.PASS), (2, Verdict.PASS), (3, Verdict.FAIL)])
def test_min_proxies_is_the_boundary(minimum: int, verdict: Verdict) -> None:
    outcome = judge(XdsSyncSpec(sources=(), min_proxies=minimum), [TWO], NOW)
    assert outcome.outcome == verdict, outcome.message
    assert outcome.thresholds["minProxies"] == str(minimum)


def test_min_proxies_counts_only_the_named_ones() -> None:
    spec = XdsSyncSpec(sources=(), expected_proxies=("a",), min_proxies=2)
    outcome = judge(spec, [TWO], NOW)
    assert outcome.outcome == Verdict.FAIL
    assert {f.reason for f in outcome.findings} >= {"TooFewProxies", "ProxyNotInCluster"}


def test_a_selector_that_picks_no_pod_is_inconclusive_unless_none_is_allowed() -> None:
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=()), [TWO], NOW)
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "NoProxiesSelected")
    allowed = judge(XdsSyncSpec(sources=(), expected_proxies=(), min_proxies=0), [NONE], NOW)
    assert allowed.outcome == Verdict.PASS


def test_an_ack_without_a_version_matches_no_expected_version() -> None:
    answer = parse_client_status(response(("a", all_types(version=""))), "csds:cp")
    spec = XdsSyncSpec(sources=(), expected_proxies=("a",), expected_version="v99")
    outcome = judge(spec, [answer], NOW)
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "VersionNotReported"), outcome.message
    assert "v99" in outcome.findings[0].threshold
    unversioned = judge(XdsSyncSpec(sources=(), expected_proxies=("a",)), [answer], NOW)
    assert unversioned.outcome == Verdict.PASS  # no version asked for: an ACK is an ACK


def _old_ack(version: str = "v1") -> Any:
    """A proxy that ACKed ``version`` an hour ago (CSDS gives the time of the old ACK)."""
    return parse_client_status(response(("a", all_types(version=version, updated=NOW - 3600))), "csds:cp")


def test_a_new_expected_version_counts_staleness_from_when_it_became_expected() -> None:
    spec = XdsSyncSpec(sources=(), expected_proxies=("a",), expected_version="v2", grace_s=30)
    memory = XdsMemory()
    first = judge(spec, [_old_ack()], NOW, memory)
    assert (first.outcome, first.reason) == (Verdict.INCONCLUSIVE, "ProxyStale"), first.message
    assert "stale 0.0s" in first.message
    assert memory.expected_version == "v2" and memory.version_since == NOW
    still = judge(spec, [_old_ack()], NOW + 29, memory)
    assert still.outcome == Verdict.INCONCLUSIVE
    late = judge(spec, [_old_ack()], NOW + 31, XdsMemory.from_wire(memory.to_wire()))  # restart
    assert (late.outcome, late.reason) == (Verdict.FAIL, "ProxyStale"), late.message
    again = judge(replace(spec, expected_version="v3"), [_old_ack()], NOW + 40, memory)
    assert again.outcome == Verdict.INCONCLUSIVE  # v3 is new: its own count starts
    assert memory.version_since == NOW + 40


def test_changed_at_given_by_the_caller_counts_from_then() -> None:
    spec = XdsSyncSpec(sources=(), expected_proxies=("a",), expected_version="v2", grace_s=30)
    memory = XdsMemory(expected_version="v2", version_since=NOW - 100)
    outcome = judge(spec, [_old_ack()], NOW, memory)
    assert (outcome.outcome, outcome.reason) == (Verdict.FAIL, "ProxyStale")
    assert "stale 100.0s" in outcome.message


def test_memory_on_the_wire_is_bounded_and_round_trips() -> None:
    memory = XdsMemory(expected_version="v2", version_since=NOW)
    memory.seen({f"pod-{i}.team-a" for i in range(1000)}, NOW)
    memory.proxies_seen["newest.team-a"] = NOW + 1
    wire = memory.to_wire()
    assert len(json.dumps(wire)) <= 8 * 1024
    assert wire["proxiesSeen"][0] == {"nodeId": "newest.team-a", "at": NOW + 1}  # the newest kept
    back = XdsMemory.from_wire(wire)
    assert back.expected_version == "v2" and back.version_since == NOW
    assert set(back.proxies_seen) <= set(memory.proxies_seen) and "newest.team-a" in back.proxies_seen
    assert XdsMemory.from_wire({"proxiesSeen": "nonsense"}).proxies_seen == {}
    assert XdsMemory.from_wire(None) == XdsMemory()


def test_a_huge_nack_text_is_cut_with_its_length() -> None:
    text = "x" * 2_000_000
    answer = parse_client_status(
        response(("a", [generic("LDS", config=csds_pb2.ERROR, client=shared.NACKED, error=text)])), "csds:cp"
    )
    outcome = judge(XdsSyncSpec(sources=(), expected_proxies=("a",), types=("LDS",)), [answer], NOW)
    assert outcome.reason == "ProxyNacked"
    assert len(json.dumps(outcome.message)) < 2 * MAX_TEXT
    assert "2,000,000 characters, cut" in outcome.message


def test_garbage_bytes_say_what_was_wrong_with_the_answer() -> None:
    answer = decode_client_status(b"\xff\xfe\x00garbage", "csds:cp")
    assert "not a CSDS ClientStatusResponse: 10 bytes that do not decode" in answer.malformed
    outcome = judge(XdsSyncSpec(sources=(), min_proxies=1), [answer], NOW)
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "MalformedAnswer")


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, _Csds]]:
    servicer = _Csds(response(("a", all_types()), ("b", all_types())))
    server = grpc.aio.server()
    csds_pb2_grpc.add_ClientStatusDiscoveryServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", servicer
    await server.stop(None)


def _cli(*argv: str) -> tuple[int, dict[str, Any]]:
    from mcp_checks.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["xds", *argv, "--json"])
    return code, json.loads(out.getvalue())


async def run_cli(*argv: str) -> tuple[int, dict[str, Any]]:
    """The CLI runs its own event loop: in a thread, while the server serves on the test's."""
    code, data = await asyncio.to_thread(_cli, *argv)
    return code, data["checks"][0]


async def test_cli_no_proxy_at_all_is_exit_3_also_when_waiting(served: tuple[str, _Csds]) -> None:
    address, servicer = served
    servicer.answer = response()
    code, row = await run_cli("--csds", address)
    assert (code, row["reason"]) == (3, "NoProxiesReported"), row
    code, row = await run_cli("--csds", address, "--expected-version", "v2", "--wait", "0.5s")
    assert (code, row["reason"]) == (3, "ConvergenceTimeout"), row
    code, row = await run_cli("--csds", address, "--min-proxies", "0")
    assert (code, row["outcome"]) == (0, "Pass"), row


async def test_cli_min_proxies_and_named_proxies_give_the_expected_set(served: tuple[str, _Csds]) -> None:
    address, _ = served
    code, row = await run_cli("--csds", address)
    assert (code, row["reason"]) == (3, "NoExpectedProxies"), row
    code, row = await run_cli("--csds", address, "--min-proxies", "2")
    assert (code, row["reason"]) == (0, "ProxiesSynced"), row
    code, row = await run_cli("--csds", address, "--min-proxies", "3")
    assert (code, row["reason"]) == (1, "TooFewProxies"), row
    code, row = await run_cli("--csds", address, "--proxy", "a", "--proxy", "c")
    assert (code, row["reason"]) == (1, "ProxyMissing"), row


async def test_cli_wait_stops_at_the_first_fail(served: tuple[str, _Csds]) -> None:
    """Waiting cannot bring a missing proxy back: the first failing look ends the wait (a timeout
    would say ConvergenceTimeout after 30 s)."""
    address, _ = served
    started = time.monotonic()
    code, row = await run_cli("--csds", address, "--min-proxies", "3", "--wait", "30s")
    assert (code, row["reason"]) == (1, "TooFewProxies"), row
    assert time.monotonic() - started < 25


async def test_cli_wait_sees_convergence_within_polls_of_the_change(served: tuple[str, _Csds]) -> None:
    address, servicer = served
    servicer.answer = response(("a", all_types(version="v1")), ("b", all_types(version="v1")))

    async def publish() -> None:
        await asyncio.sleep(1.0)
        servicer.answer = response(("a", all_types(version="v2")), ("b", all_types(version="v2")))

    changer = asyncio.create_task(publish())
    code, row = await run_cli(
        "--csds", address, "--min-proxies", "2", "--expected-version", "v2", "--wait", "20s"
    )
    await changer
    assert (code, row["reason"]) == (0, "ProxiesSynced"), row


async def test_cli_changed_at_fails_an_old_ack_past_the_grace(served: tuple[str, _Csds]) -> None:
    address, servicer = served
    servicer.answer = response(("a", all_types(version="v1", updated=time.time() - 3600)))
    one_look = ("--csds", address, "--proxy", "a", "--expected-version", "v2", "--grace-seconds", "30")
    code, row = await run_cli(*one_look)
    assert (code, row["reason"]) == (3, "ProxyStale") and "not converged yet" in row["message"], row
    published = str(time.time() - 120)
    code, row = await run_cli(*one_look, "--changed-at", published)
    assert (code, row["reason"]) == (1, "ProxyStale"), row


def test_cli_changed_at_needs_an_expected_version(capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_checks.cli import main

    with pytest.raises(SystemExit) as info:
        main(["xds", "--csds", "127.0.0.1:1", "--min-proxies", "1", "--changed-at", "2026-12-06T10:00:00Z"])
    assert info.value.code == 2 and "--changed-at goes with --expected-version" in capsys.readouterr().err


def test_cli_names_proxies_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_checks.cli import main

    with pytest.raises(SystemExit) as info:
        main(["xds", "--csds", "127.0.0.1:1", "--proxy", "a", "--selector", "app=x"])
    assert info.value.code == 2 and "--proxy and --selector" in capsys.readouterr().err
