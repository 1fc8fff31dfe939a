"""The control-plane write outage, measured: a control plane of its own whose etcd runs as three
members (the session's cluster keeps one, for speed), an operator given their client URLs
(``MCP_ETCD_ENDPOINTS``, the cluster admin's opt-in), and a drill whose etcdLeaderMove fault
really moves etcd's leadership while the drill writes through the API every 50 ms. The KPI row
carries the longest time writes failed; the revert moves the leadership back and deletes the
write probe, checked through etcd and the API.

Run it on its own (``pytest e2e/test_control_plane_drill.py``): it starts a second control plane.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_devcluster import stack
from mcp_devcluster.cluster import ClusterState
from mcp_operator.readiness.faults.controlplane import ENDPOINTS_ENV

REPO = Path(__file__).resolve().parents[1]
OPT_IN = "mcp2026.io/fault-injection=enabled"
NAMESPACE = "etcd-drill"


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    with stack.own_cluster(tmp_path_factory.mktemp("three-etcd"), REPO / "crds", etcd_members=3) as state:
        yield state


@pytest.fixture(scope="module")
def given_etcd(
    three: ClusterState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stack.OperatorProcess]:
    """The operator of this cluster, started with the etcd endpoints (only it: the variable is
    set for its start and taken away again)."""
    before = os.environ.get(ENDPOINTS_ENV)
    os.environ[ENDPOINTS_ENV] = ",".join(three.etcd_endpoints)
    try:
        op = stack.start_operator(Path(three.kubeconfig), tmp_path_factory.mktemp("operator"))
    finally:
        if before is None:
            os.environ.pop(ENDPOINTS_ENV, None)
        else:
            os.environ[ENDPOINTS_ENV] = before
    try:
        yield op
    finally:
        stack.stop(op.process)
        print(f"operator log: {op.process.log_path}")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = stack.start_refserver(tmp_path_factory.mktemp("refserver"))
    try:
        yield url
    finally:
        stack.stop(proc)


def _etcd(endpoint: str, path: str) -> dict[str, Any]:
    request = urllib.request.Request(endpoint + path, data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def _leader(three: ClusterState) -> str:
    status = _etcd(three.etcd_endpoints[0], "/v3/maintenance/status")
    members = _etcd(three.etcd_endpoints[0], "/v3/cluster/member/list")["members"]
    return next(m["name"] for m in members if m["ID"] == status["leader"])


def _kubectl(three: ClusterState, *args: str, **kw: Any) -> Any:
    return stack.kubectl(Path(three.kubeconfig), "-n", NAMESPACE, *args, **kw)


def test_an_etcd_leader_move_measures_the_write_outage_and_moves_the_leader_back(
    three: ClusterState, given_etcd: stack.OperatorProcess, target: str
) -> None:
    assert len(three.etcd_endpoints) == 3
    stack.kubectl(Path(three.kubeconfig), "create", "namespace", NAMESPACE)
    stack.kubectl(Path(three.kubeconfig), "label", "namespace", NAMESPACE, OPT_IN)
    leader = _leader(three)
    fault = {"kind": "etcdLeaderMove", "atSeconds": 2, "holdSeconds": 5}
    spec = {
        "target": {"url": target},
        "checks": {"healthProbe": {"requests": 50, "minSuccessRatio": 0.9, "maxProberLagMs": 250}},
        "drill": {
            "stages": [{"name": "steady", "load": {"rate": 10, "durationSeconds": 10}, "faults": [fault]}],
            "kpis": {"healthSuccessRatio": 0.5},
        },
    }
    _kubectl(three, "apply", "-f", "-", input_text=stack.custom_resource("MCPReadiness", "leader-move", spec))
    moved_to: set[str] = set()
    deadline = time.monotonic() + 120
    while True:
        obj = json.loads(
            _kubectl(three, "get", "mcpreadiness", "leader-move", "-o", "json", check=False).stdout or "{}"
        )
        if stack.condition_of(obj, "Complete").get("status") == "True":
            break
        moved_to.add(_leader(three))
        assert time.monotonic() < deadline, json.dumps(obj.get("status"), indent=1)
        time.sleep(0.3)
    status = obj["status"]
    (entry,) = status["faults"]
    kpis = {k["name"]: k for k in status["kpis"]}
    row = kpis.get("writeOutageSeconds")
    print(f"etcd leader move: {entry['message']}")
    print(f"write outage: {row and row['measured']} ({row and row['evidence']})")
    assert entry["phase"] == "Reverted", entry
    assert "moved etcd leadership back to" in entry["message"] or "as before" in entry["message"]
    assert moved_to - {leader}, "the leadership never moved during the drill"
    assert row is not None and row["verdict"] in ("Pass", "Warn"), row
    assert float(row["measured"].split(" s")[0]) < 5
    assert "writes failed" in row["evidence"]
    assert _leader(three) == leader  # moved back, checked through etcd
    probes = _kubectl(three, "get", "configmaps", "-l", "mcp2026.io/write-probe", "-o", "name").stdout
    assert probes == ""  # the write probe is deleted with the revert
    assert stack.condition_of(obj, "FaultsReverted")["status"] == "True"
