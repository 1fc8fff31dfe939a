"""The local control plane itself: real versions, simulated GPU nodes, and a kubelet whose pods
really run and report exit codes and termination messages through the API."""

from __future__ import annotations

import json
from typing import Any

import yaml

from mcp_devcluster.build import KUBERNETES_VERSION


def test_server_reports_the_built_version(kube: Any) -> None:
    version = json.loads(kube.run("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == KUBERNETES_VERSION
    assert version["clientVersion"]["gitVersion"] == KUBERNETES_VERSION


def test_gpu_nodes_advertise_gpus(kube: Any) -> None:
    nodes = json.loads(kube.run("get", "nodes", "-o", "json").stdout)["items"]
    gpus = {n["metadata"]["name"]: n["status"]["allocatable"].get("nvidia.com/gpu") for n in nodes}
    assert gpus["kwok-gpu-0"] == "8" and gpus["kwok-gpu-1"] == "8"
    assert gpus["mcp-local"] is None
    ready = {
        n["metadata"]["name"]: [c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"]
        for n in nodes
    }
    assert all(value == ["True"] for value in ready.values())


def _job(name: str, script: str, **container: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {"mcp2026.io/local-runner": "true"},
                        "containers": [
                            {"name": "main", "image": "unused", "command": ["sh", "-c", script], **container}
                        ],
                    }
                },
            },
        }
    )


def _terminated(kube: Any, job: str) -> dict[str, Any]:
    pods = json.loads(kube.run("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout)["items"]
    assert len(pods) == 1
    state: dict[str, Any] = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def test_failing_pod_reports_exit_code_and_log_tail(kube: Any) -> None:
    kube.apply(
        _job(
            "fails",
            "echo about to fail; echo fatal: bad config >&2; exit 3",
            terminationMessagePolicy="FallbackToLogsOnError",
        )
    )
    assert kube.wait("job/fails", "condition=Failed", timeout_s=60).returncode == 0
    terminated = _terminated(kube, "fails")
    assert terminated["exitCode"] == 3
    assert terminated["reason"] == "Error"
    assert "fatal: bad config" in terminated["message"]


def test_pod_env_and_service_account_token_work(kube: Any) -> None:
    kube.run("create", "configmap", "settings", "--from-literal=greeting=hello")
    # the pod's kubeconfig carries a token of its service account, so RBAC applies: the
    # default account may not read ConfigMaps, and the API server says 403
    probe = (
        "from kubernetes import client, config; config.load_kube_config()\n"
        "try:\n    client.CoreV1Api().read_namespaced_config_map('settings', '$(POD_NS)'); print(200)\n"
        "except client.ApiException as e:\n    print(e.status)"
    )
    script = f'echo "$GREETING $(POD_NAME) $POD_NS $(python -c "{probe}")" > "$MCP_TERMINATION_MESSAGE_PATH"'

    env = [
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    kube.apply(_job("env", script, env=env))
    assert kube.wait("job/env", "condition=Complete", timeout_s=60).returncode == 0
    terminated = _terminated(kube, "env")
    greeting, pod_name, namespace, api_status = terminated["message"].split()
    assert greeting == "hello" and pod_name.startswith("env-") and namespace == kube.namespace
    assert api_status == "403"


def test_kubectl_logs_reads_a_pod_s_output_from_its_kubelet(kube: Any) -> None:
    """The API server proxies ``pods/log`` to the local kubelet's HTTPS endpoint (its client
    certificate, the kubelet's checked by the cluster CA), as in a real cluster."""
    kube.apply(_job("talks", "for i in 1 2 3 4 5; do echo line $i; done; echo to stderr >&2"))
    assert kube.wait("job/talks", "condition=Complete", timeout_s=60).returncode == 0
    assert kube.run("logs", "job/talks").stdout.splitlines() == [f"line {i}" for i in range(1, 6)] + [
        "to stderr"
    ]
    assert kube.run("logs", "job/talks", "--tail=2").stdout.splitlines() == ["line 5", "to stderr"]
    assert kube.run("logs", "job/talks", "--limit-bytes=6").stdout == "line 1"
    missing = kube.run("logs", "job/talks", "-c", "nope", check=False)
    assert missing.returncode != 0 and "nope" in missing.stderr
    # the Nodes advertise where their kubelet serves: the two local ones on ports of their own
    nodes = json.loads(kube.run("get", "nodes", "-l", "mcp2026.io/local-runner=true", "-o", "json").stdout)
    ports = {n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] for n in nodes["items"]}
    assert len(ports) == 2 and 0 not in ports
