"""Control-plane argv builders, node bodies and recorded state; no cluster is started.

Where the real binaries are in the build cache, their own ``--help`` checks every flag we pass.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pwd
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client
from tests.devcluster.clusterstates import recorded_state

from mcp_devcluster import build
from mcp_devcluster.certs import PkiPaths
from mcp_devcluster.cli import dev_cluster, main
from mcp_devcluster.cluster import (
    CONTROLLERS,
    KWOK_NODE_LABEL,
    LOCAL_NODE,
    NODE_GRACE_S,
    NODE_HEARTBEAT_S,
    NODE_LIFECYCLE_CONTROLLERS,
    ClusterState,
    DevCluster,
    StateDirInUse,
    running_cluster,
)
from mcp_devcluster.kubelet import parse_args as kubelet_args
from mcp_devcluster.nodes import simulated_node_body
from mcp_devcluster.nodespec import default_nodes
from mcp_devcluster.processes import ManagedProcess, stop_pid

PORTS = {"etcd": 32379, "peer": 32380, "api": 36443, "kcm": 30257, "sched": 30259, "kwok": 30080}
REAL_COMPONENTS = build.components()  # resolved before any test overrides the cache


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DevCluster:
    """A DevCluster whose component binaries are 'built' (stamped) in a throwaway cache."""
    monkeypatch.setenv("MCP_OPERATOR_CACHE", str(tmp_path / "cache"))
    for name in ("kubernetes", "etcd", "kwok"):
        comp = build.components()[name]
        comp.bin_dir.mkdir(parents=True)
        (comp.bin_dir / build.STAMP).write_text("{}")
    cluster = DevCluster(tmp_path / "state")
    cluster.state_dir.mkdir(parents=True)
    return cluster


def _argvs(dev: DevCluster) -> dict[str, list[str]]:
    pki = PkiPaths(dev.state_dir / "pki")
    return {
        "etcd": dev._etcd_argv(0, [(PORTS["etcd"], PORTS["peer"])]),
        "kube-apiserver": dev._apiserver_argv(pki, [f"http://127.0.0.1:{PORTS['etcd']}"], PORTS["api"]),
        "kube-controller-manager": dev._kcm_argv(pki, PORTS["kcm"]),
        "kube-scheduler": dev._scheduler_argv(PORTS["sched"]),
        "kwok": dev._kwok_argv(PORTS["kwok"]),
    }


def _flags(argv: list[str]) -> dict[str, str]:
    out = {}
    for arg in argv[1:]:
        assert arg.startswith("--"), arg
        name, _, value = arg[2:].partition("=")
        out[name] = value
    return out


def test_binaries_come_from_the_versioned_cache(dev: DevCluster) -> None:
    argvs = _argvs(dev)
    table = build.components()
    assert argvs["etcd"][0] == str(table["etcd"].binary("etcd"))
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert argvs[name][0] == str(table["kubernetes"].binary(name))
    assert argvs["kwok"][0] == str(table["kwok"].binary("kwok"))


def _loopback(host: str) -> bool:
    return host == "localhost" or ipaddress.ip_address(host).is_loopback


def test_everything_listens_and_connects_on_loopback_only(dev: DevCluster) -> None:
    checked = 0
    for name, argv in _argvs(dev).items():
        for flag, value in _flags(argv).items():
            if flag == "service-account-issuer":
                continue  # an identifier written into tokens, never dialled
            for part in value.split(","):
                part = part.split("=", 1)[-1]  # etcd's initial-cluster is name=url
                if "://" in part:
                    host = urlsplit(part).hostname or ""
                elif flag.endswith(("address", "-ip")):
                    host = part.rsplit(":", 1)[0] if part.count(":") == 1 else part
                else:
                    continue
                assert _loopback(host), f"{name} --{flag}={value}"
                checked += 1
    assert checked >= 10  # the walk really saw the addresses


def test_etcd_argv(dev: DevCluster) -> None:
    flags = _flags(_argvs(dev)["etcd"])
    assert (
        flags["listen-client-urls"] == flags["advertise-client-urls"] == f"http://127.0.0.1:{PORTS['etcd']}"
    )
    assert flags["initial-cluster"] == f"{flags['name']}={flags['listen-peer-urls']}"
    assert Path(flags["data-dir"]).parent == dev.state_dir


def test_three_etcd_members_know_each_other_and_the_api_server_knows_them_all(dev: DevCluster) -> None:
    ports = [(32379, 32380), (32381, 32382), (32383, 32384)]
    argvs = [_flags(dev._etcd_argv(i, ports)) for i in range(3)]
    assert [a["name"] for a in argvs] == ["mcp-dev", "mcp-dev-2", "mcp-dev-3"]
    assert len({a["data-dir"] for a in argvs}) == 3
    expected = (
        "mcp-dev=http://127.0.0.1:32380,mcp-dev-2=http://127.0.0.1:32382,mcp-dev-3=http://127.0.0.1:32384"
    )
    assert all(a["initial-cluster"] == expected for a in argvs)
    assert argvs[1]["listen-client-urls"] == "http://127.0.0.1:32381"
    endpoints = [f"http://127.0.0.1:{c}" for c, _ in ports]
    api = _flags(dev._apiserver_argv(PkiPaths(dev.state_dir / "pki"), endpoints, PORTS["api"]))
    assert api["etcd-servers"] == ",".join(endpoints)
    with pytest.raises(ValueError, match="1 or 3"):
        DevCluster(dev.state_dir, etcd_members=2)


def test_the_autoscaler_runs_and_reads_its_metrics_every_second(dev: DevCluster) -> None:
    flags = _flags(dev._kcm_argv(PkiPaths(dev.state_dir / "pki"), PORTS["kcm"]))
    assert "horizontal-pod-autoscaler-controller" in flags["controllers"].split(",")
    assert flags["horizontal-pod-autoscaler-sync-period"] == "1s"


def test_apiserver_argv(dev: DevCluster) -> None:
    flags = _flags(_argvs(dev)["kube-apiserver"])
    pki = PkiPaths(dev.state_dir / "pki")
    assert flags["etcd-servers"] == f"http://127.0.0.1:{PORTS['etcd']}"
    assert flags["secure-port"] == str(PORTS["api"])
    assert flags["tls-cert-file"] == str(pki.serving_cert) and flags["tls-private-key-file"] == str(
        pki.serving_key
    )
    assert flags["client-ca-file"] == str(pki.ca_cert)
    assert flags["service-account-key-file"] == str(pki.sa_pub)
    assert flags["service-account-signing-key-file"] == str(pki.sa_key)
    assert flags["service-cluster-ip-range"] == dev.plan.service_cidr
    assert flags["authorization-mode"] == "RBAC"
    # pod logs from the local kubelets: the harness's client pair, their serving cert checked,
    # the Nodes' InternalIP first (their hostnames do not resolve)
    assert flags["kubelet-client-certificate"] == str(pki.kubelet_client_cert)
    assert flags["kubelet-client-key"] == str(pki.kubelet_client_key)
    assert flags["kubelet-certificate-authority"] == str(pki.ca_cert)
    assert flags["kubelet-preferred-address-types"].split(",")[0] == "InternalIP"


def test_one_local_kubelet_per_local_node(dev: DevCluster) -> None:
    for node in dev.local_nodes:
        argv = dev._kubelet_argv(node)
        assert argv[1:3] == ["-m", "mcp_devcluster.kubelet"]
        args = kubelet_args(argv[3:])
        assert args.node == node and args.kubeconfig == dev.kubeconfig
        assert args.pod_loopback == dev.plan.pod_loopback
        assert args.work_dir.parent.parent == dev.state_dir
        pki = PkiPaths(dev.state_dir / "pki")
        assert args.tls == (pki.kubelet_serving_cert, pki.kubelet_serving_key, pki.ca_cert)
    assert len({str(dev._kubelet_argv(n)) for n in dev.local_nodes}) == len(dev.local_nodes) == 2
    assert dev.local_nodes[0].name == LOCAL_NODE


def test_service_proxy_argv(dev: DevCluster) -> None:
    argv = dev._proxy_argv(7)
    assert argv[1:3] == ["-m", "mcp_devcluster.serviceproxy"]
    assert _flags(argv[2:]) == {
        "kubeconfig": str(dev.kubeconfig),
        "pod-loopback": str(dev.plan.pod_loopback),
        "admin-fd": "7",
    }


def test_controller_manager_runs_what_the_operator_needs(dev: DevCluster) -> None:
    flags = _flags(_argvs(dev)["kube-controller-manager"])
    controllers = flags["controllers"].split(",")
    assert flags["controllers"] == CONTROLLERS
    # Jobs run, owned objects are collected, finished Jobs expire, pods get service-account tokens
    for needed in ("job", "garbage-collector", "ttl-after-finished", "serviceaccount", "namespace"):
        assert f"{needed}-controller" in controllers
    assert flags["service-account-private-key-file"] == str(PkiPaths(dev.state_dir / "pki").sa_key)
    assert flags["kubeconfig"] == str(dev.kubeconfig)


def test_kwok_manages_exactly_the_simulated_nodes(dev: DevCluster) -> None:
    flags = _flags(_argvs(dev)["kwok"])
    key, value = flags["manage-nodes-with-label-selector"].split("=")
    assert (key, value) == tuple(KWOK_NODE_LABEL.split("="))
    stages = list(yaml.safe_load_all(Path(flags["config"]).read_text()))
    assert stages and all(doc["kind"] == "Stage" for doc in stages)
    for node in default_nodes():
        body: dict[str, Any] = simulated_node_body(node)
        assert body["metadata"]["labels"][key] == value
    assert LOCAL_NODE not in {n.name for n in default_nodes()}  # the local node is ours, not kwok's


def test_gpu_nodes_advertise_gpus_and_are_tainted() -> None:
    nodes = default_nodes()
    gpu = [n for n in nodes if n.gpus]
    assert gpu and any(not n.gpus for n in nodes)
    for node in nodes:
        body: dict[str, Any] = simulated_node_body(node)
        capacity = body["status"]["capacity"]
        if node.gpus:
            assert capacity["nvidia.com/gpu"] == str(node.gpus)
            taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
            assert taint in body["spec"]["taints"]
            assert body["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
        else:
            assert "nvidia.com/gpu" not in capacity and body["spec"] == {}


def _help_flags(binary: Path) -> tuple[set[str], str]:
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    text = out.stdout + out.stderr
    return set(re.findall(r"(?m)^\s*(?:-\w, )?--([a-z0-9][a-z0-9-]*)", text)), text


@pytest.fixture(scope="module")
def real_binaries() -> Iterator[dict[str, Path]]:
    wanted = {
        "etcd": REAL_COMPONENTS["etcd"].binary("etcd"),
        "kube-apiserver": REAL_COMPONENTS["kubernetes"].binary("kube-apiserver"),
        "kube-controller-manager": REAL_COMPONENTS["kubernetes"].binary("kube-controller-manager"),
        "kube-scheduler": REAL_COMPONENTS["kubernetes"].binary("kube-scheduler"),
        "kwok": REAL_COMPONENTS["kwok"].binary("kwok"),
    }
    missing = [str(p) for p in wanted.values() if not p.is_file()]
    if missing:
        pytest.skip(f"control-plane binaries not built ({', '.join(missing)}); run `mcp-devcluster build`")
    yield wanted


def test_a_cluster_with_node_lifecycle_takes_silent_nodes_down_as_a_real_one(dev: DevCluster) -> None:
    """The session's clusters run no node-lifecycle controller (kwok's nodes and the tests' cordons
    do without it); one asked for it runs it with a grace the kubelets' heartbeats stay inside."""
    assert NODE_LIFECYCLE_CONTROLLERS not in _flags(_argvs(dev)["kube-controller-manager"])["controllers"]
    dev.node_lifecycle = True
    kcm, api = _flags(_argvs(dev)["kube-controller-manager"]), _flags(_argvs(dev)["kube-apiserver"])
    assert kcm["controllers"].split(",")[-2:] == NODE_LIFECYCLE_CONTROLLERS.split(",")
    assert kcm["node-monitor-grace-period"] == f"{NODE_GRACE_S}s" and NODE_HEARTBEAT_S * 3 <= NODE_GRACE_S
    assert api["default-unreachable-toleration-seconds"] == api["default-not-ready-toleration-seconds"]
    argv = dev._kubelet_argv(dev.local_nodes[0])
    assert kubelet_args(argv[3:]).heartbeat_seconds == NODE_HEARTBEAT_S


def test_the_outage_annotation_is_the_operators(dev: DevCluster) -> None:
    from mcp_devcluster.localnode import OUTAGE_ANNOTATION, outage_requested
    from mcp_operator.api.drill import OUTAGE_ANNOTATION as OPERATORS

    assert OUTAGE_ANNOTATION == OPERATORS
    node = client.V1Node(metadata=client.V1ObjectMeta(name="n", annotations={OPERATORS: "zone-a"}))
    assert outage_requested(node) and not outage_requested(
        client.V1Node(metadata=client.V1ObjectMeta(name="n"))
    )


def test_every_flag_is_known_to_the_real_binaries(dev: DevCluster, real_binaries: dict[str, Path]) -> None:
    dev.node_lifecycle = True  # its flags too
    for name, argv in _argvs(dev).items():
        known, _ = _help_flags(real_binaries[name])
        unknown = set(_flags(argv)) - known
        assert not unknown, f"{name} does not know {sorted(unknown)}"


def test_every_controller_name_is_known(real_binaries: dict[str, Path]) -> None:
    _, text = _help_flags(real_binaries["kube-controller-manager"])
    match = re.search(r"All controllers: ([a-z0-9, -]+)", text)
    assert match, "kube-controller-manager --help lists no controllers"
    known = {name.strip() for name in match.group(1).split(",")}
    wanted = set(CONTROLLERS.split(",")) | set(NODE_LIFECYCLE_CONTROLLERS.split(","))
    assert wanted <= known, wanted - known


def test_state_round_trip(tmp_path: Path) -> None:
    state = ClusterState(
        state_dir=str(tmp_path),
        kubeconfig=str(tmp_path / "kubeconfig"),
        server="https://127.0.0.1:36443",
        etcd_port=32379,
        apiserver_port=36443,
        pids={"etcd": 11, "kube-apiserver": 12},
        started_at=time.time(),
        startup_seconds={"total": 4.2},
    )
    state.save()
    assert ClusterState.load(tmp_path) == state
    assert json.loads((tmp_path / "state.json").read_text())["pids"] == {"etcd": 11, "kube-apiserver": 12}


def test_down_stops_what_another_process_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc = ManagedProcess("etcd", ["sleep", "60"], tmp_path / "logs" / "etcd.log")
    pid = proc.start()
    try:
        state_dir = tmp_path / "state"
        state_dir.mkdir()
        recorded_state(state_dir, pids={"etcd": pid}, started_at=time.time()).save()
        assert dev_cluster("env", state_dir) == 0
        # then the built kubectl's PATH line, where it is built (test_devcluster_cli.py)
        assert capsys.readouterr().out.splitlines()[0] == f"export KUBECONFIG={state_dir / 'kubeconfig'}"
        assert dev_cluster("status", state_dir) == 0
        assert json.loads(capsys.readouterr().out)["pids"] == {"etcd": pid}
        DevCluster(state_dir).down()
        assert proc.popen is not None and proc.popen.poll() is not None
        assert not (state_dir / "state.json").exists()
        DevCluster(state_dir).down()  # twice is fine
        assert dev_cluster("env", state_dir) == 1
        assert "no cluster recorded" in capsys.readouterr().err
    finally:
        stop_pid(pid, grace_s=1.0)


def test_up_refuses_a_state_directory_whose_cluster_runs_and_leaves_it_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = ManagedProcess("kube-apiserver", ["sleep", "60"], tmp_path / "logs" / "apiserver.log")
    pid = proc.start()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    recorded = recorded_state(
        state_dir, server="https://127.0.0.1:36443", pids={"kube-apiserver": pid}, started_at=time.time()
    )
    recorded.save()
    try:
        with pytest.raises(StateDirInUse) as refused:
            DevCluster(state_dir).up()
        message = str(refused.value)
        assert f"already runs from {state_dir.resolve()}" in message and "https://127.0.0.1:36443" in message
        assert (
            f"mcp-devcluster down --state-dir {state_dir.resolve()}" in message
            and "--state-dir DIR" in message
        )
        assert f"by {pwd.getpwuid(os.getuid()).pw_name}" in message
        assert proc.exited() is None and ClusterState.load(state_dir) == recorded  # nothing taken over
        assert main(["up", "--local-only", "--state-dir", str(state_dir)]) == 1
        assert "already runs from" in capsys.readouterr().err
    finally:
        DevCluster(state_dir).down()
    assert running_cluster(state_dir) is None  # once it is down, the directory is free again
