"""The two local nodes without a cluster: pod IPs and their loopback twins, the Node bodies of
two zones, the cordon taint, readiness probes and preStop hooks, and the Ready they report."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from mcp_devcluster.containers import RunningContainer
from mcp_devcluster.localnode import (
    UNSCHEDULABLE_TAINT,
    format_taint,
    local_node_body,
    mirrored_taints,
    parse_taint,
)
from mcp_devcluster.nodespec import STANDBY_TAINT, ZONE_LABEL, default_local_nodes
from mcp_devcluster.podenv import field_value
from mcp_devcluster.podnet import POD_NETWORK, PodAddresses, PodIPAllocator, loopback_twin
from mcp_devcluster.podstatus import readiness_status, running_status
from mcp_devcluster.probes import ProbeCounter, resolve_port, run_pre_stop, run_probe

TWINS = ipaddress.IPv4Network("127.101.0.0/16")


def test_pod_ips_have_loopback_twins_with_the_same_host_bits() -> None:
    assert loopback_twin("10.200.1.2", TWINS) == "127.101.1.2"
    assert loopback_twin("10.200.255.254", TWINS) == "127.101.255.254"
    assert loopback_twin("10.244.0.5", TWINS) == "10.244.0.5"  # kwok's pods are not ours
    assert loopback_twin("fd00::1", TWINS) == "fd00::1"
    assert not POD_NETWORK.is_loopback  # the API server refuses loopback endpoints


def test_allocator_hands_out_distinct_addresses_in_turn() -> None:
    alloc = PodIPAllocator("10.200.1.0/29", TWINS)  # .2 to .6
    first = [alloc.allocate().pod_ip for _ in range(3)]
    assert first == ["10.200.1.2", "10.200.1.3", "10.200.1.4"]
    alloc.release("10.200.1.2")
    # a freed address is not handed straight back: the next ones come first
    assert [alloc.allocate().pod_ip for _ in range(3)] == ["10.200.1.5", "10.200.1.6", "10.200.1.2"]
    with pytest.raises(RuntimeError, match="no free pod IP"):
        alloc.allocate()


def test_allocator_keeps_a_pods_earlier_address_when_free() -> None:
    alloc = PodIPAllocator("10.200.2.0/24", TWINS)
    assert alloc.allocate("10.200.2.77") == PodAddresses("10.200.2.77", "127.101.2.77")
    assert alloc.allocate("10.200.2.77").pod_ip == "10.200.2.2"  # taken: the next in turn
    assert alloc.allocate("10.200.1.9").pod_ip == "10.200.2.3"  # another node's
    with pytest.raises(ValueError, match="not inside"):
        PodIPAllocator("10.96.0.0/24", TWINS)


def test_downward_api_gives_the_process_its_loopback_twin() -> None:
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p"), spec=client.V1PodSpec(containers=[]))
    addresses = PodAddresses("10.200.1.5", "127.200.1.5")
    assert field_value(pod, "status.podIP", addresses) == "127.200.1.5"
    assert field_value(pod, "status.hostIP", addresses) == "127.0.0.1"


def test_local_nodes_are_two_zones_of_local_runners() -> None:
    nodes = default_local_nodes()
    assert nodes[0].name == "mcp-local"  # the name earlier tests and samples use
    assert len({n.zone for n in nodes}) == 2
    cidrs = [ipaddress.IPv4Network(n.pod_cidr) for n in nodes]
    assert all(c.subnet_of(POD_NETWORK) for c in cidrs) and not cidrs[0].overlaps(cidrs[1])
    for node in nodes:
        body = local_node_body(node)
        labels = body["metadata"]["labels"]
        assert labels["mcp2026.io/local-runner"] == "true" and labels[ZONE_LABEL] == node.zone
        assert body["spec"]["podCIDR"] == node.pod_cidr
    # only the second zone's node is kept for pods that ask to spread (or have nowhere else)
    assert "taints" not in local_node_body(nodes[0])["spec"]
    assert local_node_body(nodes[1])["spec"]["taints"] == [STANDBY_TAINT]
    assert STANDBY_TAINT["effect"] == "PreferNoSchedule"


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("a/b=c:NoSchedule", {"key": "a/b", "value": "c", "effect": "NoSchedule"}),
        ("key:PreferNoSchedule", {"key": "key", "effect": "PreferNoSchedule"}),
    ],
)
def test_taints_round_trip_through_the_kubelet_flag(text: str, taint: dict[str, str]) -> None:
    assert parse_taint(text) == taint
    assert format_taint(taint) == text


@pytest.mark.parametrize("text", ["key", "key=value", ":NoSchedule", "key:Sometimes"])
def test_bad_taints_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_taint(text)


def _node(unschedulable: bool, *taints: client.V1Taint) -> client.V1Node:
    return client.V1Node(spec=client.V1NodeSpec(unschedulable=unschedulable, taints=list(taints) or None))


def test_cordon_is_mirrored_into_the_unschedulable_taint() -> None:
    standby = client.V1Taint(key="mcp2026.io/standby-zone", value="true", effect="PreferNoSchedule")
    cordon = client.V1Taint(key=UNSCHEDULABLE_TAINT, effect="NoSchedule")
    assert mirrored_taints(_node(True, standby)) == [
        {"key": "mcp2026.io/standby-zone", "value": "true", "effect": "PreferNoSchedule"},
        {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"},
    ]
    assert mirrored_taints(_node(False, standby, cordon)) == [
        {"key": "mcp2026.io/standby-zone", "value": "true", "effect": "PreferNoSchedule"}
    ]
    assert mirrored_taints(_node(True, cordon)) is None
    assert mirrored_taints(_node(False)) is None


def test_probe_counter_follows_the_thresholds() -> None:
    counter = ProbeCounter(success_threshold=2, failure_threshold=3)
    assert [counter.record(ok) for ok in (True, False, True, True)] == [False, False, False, True]
    assert counter.ready
    assert [counter.record(ok) for ok in (False, False, True, False, False, False)] == [False] * 5 + [True]
    assert not counter.ready


@pytest.fixture
def http_server() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/ok" else 503)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.200.9.9", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _container(port: int, **kw: object) -> client.V1Container:
    return client.V1Container(
        name="main", ports=[client.V1ContainerPort(name="http", container_port=port)], **kw
    )


def test_probes_run_against_the_pods_own_address(http_server: int, tmp_path: Path) -> None:
    container = _container(http_server)
    probe = lambda **kw: client.V1Probe(timeout_seconds=1, **kw)  # noqa: E731
    host = "127.200.9.9"
    assert run_probe(
        probe(http_get=client.V1HTTPGetAction(path="/ok", port="http")), container, host, {}, tmp_path
    )
    assert not run_probe(
        probe(http_get=client.V1HTTPGetAction(path="/no", port="http")), container, host, {}, tmp_path
    )
    assert run_probe(
        probe(tcp_socket=client.V1TCPSocketAction(port=http_server)), container, host, {}, tmp_path
    )
    # the same port on another pod's address is not this pod's
    assert not run_probe(
        probe(tcp_socket=client.V1TCPSocketAction(port=http_server)), container, "127.200.9.8", {}, tmp_path
    )
    assert run_probe(
        probe(_exec=client.V1ExecAction(command=["sh", "-c", 'test "$X" = 1'])),
        container,
        host,
        {"X": "1"},
        tmp_path,
    )
    assert not run_probe(probe(http_get=client.V1HTTPGetAction(port="grpc")), container, host, {}, tmp_path)
    assert resolve_port("8000", container) == 8000


def test_pre_stop_sleep_is_cut_off_by_the_grace_period(tmp_path: Path) -> None:
    container = client.V1Container(
        name="main",
        lifecycle=client.V1Lifecycle(
            pre_stop=client.V1LifecycleHandler(sleep=client.V1SleepAction(seconds=30))
        ),
    )
    began = time.monotonic()
    run_pre_stop(container, "127.0.0.1", {}, tmp_path, budget_s=0.3)
    assert 0.25 < time.monotonic() - began < 2
    marker = tmp_path / "ran"
    hook = client.V1LifecycleHandler(_exec=client.V1ExecAction(command=["touch", str(marker)]))
    run_pre_stop(
        client.V1Container(name="main", lifecycle=client.V1Lifecycle(pre_stop=hook)), "", {}, tmp_path, 5
    )
    assert marker.exists()


def _running(name: str, ready: bool) -> RunningContainer:
    return RunningContainer(name, None, Path("log"), Path("msg"), "File", "t", ready=ready)  # type: ignore[arg-type]


def test_a_pod_is_ready_once_every_probe_passed() -> None:
    pod = client.V1Pod(
        spec=client.V1PodSpec(containers=[client.V1Container(name="a"), client.V1Container(name="b")]),
        status=client.V1PodStatus(),
    )
    addresses = PodAddresses("10.200.1.2", "127.200.1.2")
    status = running_status(pod, [_running("a", True), _running("b", False)], "t", addresses)
    assert (status["podIP"], status["podIPs"], status["hostIP"]) == (
        "10.200.1.2",
        [{"ip": "10.200.1.2"}],
        "127.0.0.1",
    )
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "ContainersNotReady"
    assert conditions["ContainersReady"]["message"] == "containers with unready status: [b]"
    assert [s["ready"] for s in status["containerStatuses"]] == [True, False]
    ready = readiness_status(pod, [_running("a", True), _running("b", True)], "t")
    assert {c["type"]: c["status"] for c in ready["conditions"]} == {
        "ContainersReady": "True",
        "Ready": "True",
    }


def test_loopback_twins_can_be_bound_without_configuration() -> None:
    with socket.socket() as sock:
        sock.bind((loopback_twin("10.200.3.4", TWINS), 0))
        assert sock.getsockname()[0] == "127.101.3.4"
