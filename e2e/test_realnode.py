"""Pods as containers on a real node: containerd and runc from Debian, a kubelet v1.36.3 built
from the module proxy, images built here (``mcp_devcluster.realnode``).

What only a container shows, asserted from inside it through ``kubectl logs``: the image's
non-root user, a read-only root filesystem, no capabilities, seccomp filtering, the service
account's token reaching the API server; and the memory limit enforced by the kernel, the
container OOM-killed and reported so by the kubelet.

The node joins a control plane of its own (no kwok, no process nodes), so nothing else of the
session lands on it. It needs root (containerd, runc, network links); without root it is
skipped with that reason.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import build, stack
from mcp_devcluster.cluster import ClusterState, DevCluster
from mcp_devcluster.realnode import lifecycle, node
from mcp_devcluster.realnode.node import RealNodeState

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the real node needs root (containerd, runc, links)"
)


@dataclass
class RealCluster:
    cluster: ClusterState
    node: RealNodeState

    @property
    def kubeconfig(self) -> Path:
        return Path(self.cluster.kubeconfig)

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> Any:
        return stack.kubectl(self.kubeconfig, *args, input_text=input_text, check=check, timeout=120)


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    # the API server listens on the node's address, so the kubernetes Service has an endpoint
    node.add_node_address()
    dev = DevCluster(
        tmp_path_factory.mktemp("realcluster"), nodes=[], local_nodes=[], api_address=node.NODE_IP
    )
    try:
        state = dev.up()
        node_state = lifecycle.up(Path(state.state_dir))
        print("real node startup:", json.dumps(node_state.startup_seconds))
        try:
            yield RealCluster(state, node_state)
        finally:
            lifecycle.down(Path(state.state_dir), keep_address=True)
    finally:
        dev.down()
        node.remove_node_address()


def _on_the_real_node(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node.NODE_NAME}
    spec["tolerations"] = [{"key": "mcp2026.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]
    spec.setdefault("restartPolicy", "Never")
    for container in spec["containers"]:
        container.setdefault("imagePullPolicy", "Never")  # nothing is pulled: the image is local
    return pod


def _wait_pod(real: RealCluster, name: str, done: Any, timeout_s: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    pod: dict[str, Any] = {}
    while time.monotonic() < deadline:
        out = real.kubectl("get", "pod", name, "-o", "json", check=False)
        if out.returncode == 0:
            pod = json.loads(out.stdout)
            if done(pod):
                return pod
        time.sleep(0.5)
    events = real.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", check=False)
    raise AssertionError(
        f"pod {name} not done in {timeout_s:.0f}s: {json.dumps(pod.get('status'))}\n{events.stdout}"
    )


def _finished(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


LOCKED_DOWN = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}

PROBE = """
import os, ssl, urllib.request
print("uid", os.getuid())
try:
    open("/probe", "w")
except OSError as exc:
    print("rootfs", exc.strerror)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print("CapEff", status["CapEff"].strip(), "Seccomp", status["Seccomp"].strip())
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
req = urllib.request.Request(f"https://{host}:{port}/version", headers={"Authorization": "Bearer " + token})
print("api", urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca), timeout=10).status)
"""


def test_the_operator_image_runs_locked_down_and_reaches_the_api_with_its_token(real: RealCluster) -> None:
    pod = _on_the_real_node(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "locked-down", "namespace": "default"},
            "spec": {
                "hostNetwork": True,  # the API server's ClusterIP is on the machine's loopback
                "containers": [
                    {
                        "name": "probe",
                        "image": real.node.images["operator"],
                        "command": ["python3", "-c", PROBE],
                        "securityContext": LOCKED_DOWN,
                    }
                ],
            },
        }
    )
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(pod))
    done = _wait_pod(real, "locked-down", _finished)
    logs = real.kubectl("logs", "locked-down").stdout
    assert done["status"]["phase"] == "Succeeded", logs
    assert done["spec"]["nodeName"] == node.NODE_NAME
    lines = dict(line.split(" ", 1) for line in logs.splitlines() if " " in line)
    assert lines["uid"] == "65532"  # the image's USER
    assert lines["rootfs"] == "Read-only file system"
    assert lines["CapEff"].startswith("0000000000000000") and lines["CapEff"].endswith("Seccomp 2")
    assert lines["api"] == "200"


def test_a_container_past_its_memory_limit_is_oom_killed_and_reported(real: RealCluster) -> None:
    pod = _on_the_real_node(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "greedy", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "greedy",
                        "image": real.node.images["operator"],
                        "command": ["python3", "-c", "x = bytearray(512 * 2**20); print(len(x))"],
                        "resources": {"limits": {"memory": "64Mi", "cpu": "500m"}},
                        "securityContext": LOCKED_DOWN,
                    }
                ],
            },
        }
    )
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(pod))
    done = _wait_pod(real, "greedy", _finished)
    (status,) = done["status"]["containerStatuses"]
    terminated = status["state"]["terminated"]
    assert done["status"]["phase"] == "Failed"
    assert terminated["reason"] == "OOMKilled" and terminated["exitCode"] == 137, terminated


def _free_node_port() -> int:
    """A port free on every address: pods in the node's network bind the node's address or all
    of them, where the API server and the kubelet listen too (a port free on loopback alone can
    be theirs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def _refserver_on_the_real_node(real: RealCluster, namespace: str, port: int) -> str:
    """manifests/refserver on the real node (one replica, in the node's network: Services reach it
    there); returns its Service's ClusterIP URL."""
    deployment, service = (
        yaml.safe_load((REPO / "manifests" / "refserver" / f"{kind}.yaml").read_text())
        for kind in ("deployment", "service")
    )
    deployment["spec"]["replicas"] = 1
    pod = deployment["spec"]["template"]
    _on_the_real_node(pod)
    pod["spec"].pop("restartPolicy")  # a Deployment's pods restart
    pod["spec"]["hostNetwork"] = True
    (container,) = pod["spec"]["containers"]
    container["image"] = real.node.images["refserver"]
    container["args"][container["args"].index("8000")] = str(port)
    container["ports"][0]["containerPort"] = port
    container["securityContext"] = LOCKED_DOWN
    for item in (deployment, service):
        item["metadata"]["namespace"] = namespace
        real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(item))
    rollout = real.kubectl(
        "-n", namespace, "rollout", "status", "deployment/refserver", "--timeout=120s", check=False
    )
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr
    ip = real.kubectl(
        "-n", namespace, "get", "service", "refserver", "-o", "jsonpath={.spec.clusterIP}"
    ).stdout
    return f"http://{ip}:8080"


def test_the_chart_installs_the_operator_from_its_image_and_it_gates_a_release(real: RealCluster) -> None:
    """helm install on the real node (the chart's locked-down pod, the image's tini, the
    operator's own ServiceAccount and RBAC), the refserver sample Ready through it, its JSON logs
    through ``kubectl logs``, and a SIGTERM ending it well inside its grace period."""
    namespace = "mcp-system"
    real.kubectl("create", "namespace", namespace, check=False)
    url = _refserver_on_the_real_node(real, namespace, _free_node_port())
    repository, tag = real.node.images["operator"].rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "hostNetwork": True,  # see the module's docstring: the Service addresses are the node's loopback
        "healthzPort": _free_node_port(),
        "metrics": {"port": _free_node_port()},
        "nodeSelector": {"kubernetes.io/hostname": node.NODE_NAME},
        "tolerations": [{"key": "mcp2026.io/real-node", "operator": "Exists", "effect": "NoSchedule"}],
        "shutdownTimeoutSeconds": 20,
        "terminationGracePeriodSeconds": 30,
    }
    values_file = Path(real.cluster.state_dir) / "operator-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    helm = [str(build.binary("helm", "helm")), f"--kubeconfig={real.kubeconfig}", "--namespace", namespace]
    installed = subprocess.run(
        [
            *helm,
            "install",
            "ops",
            str(REPO / "charts" / "mcp-operator"),
            "-f",
            str(values_file),
            "--wait",
            "--timeout",
            "180s",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    gate = yaml.safe_load((REPO / "manifests" / "samples" / "mcpreadiness-refserver.yaml").read_text())
    gate["metadata"]["namespace"] = namespace
    gate["spec"]["target"]["url"] = url
    real.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(gate))
    waited = real.kubectl(
        "-n",
        namespace,
        "wait",
        "--for=condition=Ready",
        "mcpreadiness/refserver-ready",
        "--timeout=100s",
        check=False,
    )
    status = json.loads(
        real.kubectl("-n", namespace, "get", "mcpreadiness", "refserver-ready", "-o", "json").stdout
    )
    logs = real.kubectl("-n", namespace, "logs", "deployment/ops").stdout
    (Path(real.cluster.state_dir) / "operator-logs.txt").write_text(  # kept for a failure's reader
        logs
        + "\n--- previous ---\n"
        + real.kubectl("-n", namespace, "logs", "deployment/ops", "--previous", check=False).stdout
        + real.kubectl("-n", namespace, "describe", "pods", check=False).stdout
    )
    assert waited.returncode == 0, (status.get("status"), logs[-3000:])
    assert status["status"]["verdict"] == "Pass"
    records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert records and all({"time", "level", "message"} <= set(r) for r in records)
    (pod,) = json.loads(
        real.kubectl(
            "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/name=mcp-operator", "-o", "json"
        ).stdout
    )["items"]
    assert pod["spec"]["nodeName"] == node.NODE_NAME
    began = time.monotonic()
    real.kubectl("-n", namespace, "delete", "pod", pod["metadata"]["name"], "--wait=true", "--timeout=60s")
    stopped_s = time.monotonic() - began
    assert stopped_s < values["terminationGracePeriodSeconds"], stopped_s  # it ended on SIGTERM, not SIGKILL
    subprocess.run([*helm, "uninstall", "ops"], capture_output=True, check=False, timeout=120)
