"""A config hot update applied in place beside the rollout variant, both timed by a drill: the
reference server as a Deployment on the local nodes with its ConfigMap mounted (``--config-dir``:
it reloads the files when they change and answers ``GET /config`` with the content's hash); the
harness's kubelet refreshes a running pod's mounted ConfigMap as a kubelet's volume manager does.
``rollout: false`` patches the ConfigMap alone and is done when every ready pod answers the new
hash through the Service, no pod replaced; the rollout variant rolls the hash into the pod
template and is done when every ready pod runs it. The KPI board has one row for each, naming
which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from mcp_checks.api import ConfigContent, config_hash
from mcp_devcluster import stack

REPO = Path(__file__).resolve().parents[1]

OPT_IN = "mcp2026.io/fault-injection=enabled"
CONFIG = "refserver-config"


def _hash(data: dict[str, str]) -> str:
    return config_hash([ConfigContent("ConfigMap", CONFIG, data, {})])


def _reloading_refserver(kube: Any) -> str:
    """manifests/refserver with its ConfigMap mounted and reloaded in place; its Service URL."""
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG},
        "data": {"mode": "v1"},
    }
    kube.apply(yaml.safe_dump(config_map))
    deployment = yaml.safe_load((REPO / "manifests" / "refserver" / "deployment.yaml").read_text())
    template = deployment["spec"]["template"]
    template["metadata"]["annotations"] = {"checksum/config": _hash({"mode": "v1"})}
    (container,) = template["spec"]["containers"]
    container["args"] += ["--config-dir", "/etc/refserver", "--config-map", CONFIG]
    container["volumeMounts"] = [{"name": "config", "mountPath": "/etc/refserver", "readOnly": True}]
    template["spec"]["volumes"] = [{"name": "config", "configMap": {"name": CONFIG}}]
    kube.apply(yaml.safe_dump(deployment))
    kube.apply((REPO / "manifests" / "refserver" / "service.yaml").read_text())
    rollout = kube.run("rollout", "status", "deployment/refserver", "--timeout=120s", check=False)
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr
    service = kube.get("service", "refserver")
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"


def _update(rollout: bool, mode: str) -> dict[str, Any]:
    fault = {"kind": "configHotUpdate", "configMap": CONFIG, "workload": "refserver", "data": {"mode": mode}}
    return {**fault, "rollout": rollout, "atSeconds": 1}


def test_an_in_place_reload_and_a_rollout_are_each_timed_and_named(kube: Any) -> None:
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    url = _reloading_refserver(kube)
    generation = int(kube.get("deployment", "refserver")["metadata"]["generation"])
    load = {"rate": 10, "durationSeconds": 8, "windowSeconds": 2, "path": "/v2/health/ready"}
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"path": "/v2/health/ready", "requests": 100, "minSuccessRatio": 0.9}},
        "drill": {
            "kpis": {"hotUpdateSeconds": 60, "healthSuccessRatio": 0.5},
            "stages": [
                {"name": "in-place", "load": load, "faults": [_update(False, "v2")]},
                {"name": "rolled", "load": {**load, "durationSeconds": 20}, "faults": [_update(True, "v3")]},
            ],
        },
    }
    kube.apply(stack.custom_resource("MCPReadiness", "hot", spec))
    waited = kube.wait("mcpreadiness/hot", "condition=Complete", timeout_s=240)
    status = kube.get("mcpreadiness", "hot")["status"]
    assert waited.returncode == 0, json.dumps(status, indent=1)
    rows = {k["fault"]: k for k in status["kpis"] if k["name"] == "hotUpdateSeconds"}
    assert set(rows) == {"in-place-0", "rolled-0"}, status["kpis"]
    in_place, rolled = rows["in-place-0"], rows["rolled-0"]
    assert "(in place)" in in_place["evidence"] and "(rollout)" in rolled["evidence"]
    # both measured (never "never, within the drill"), each against the same limit
    assert in_place["verdict"] == "Pass" and rolled["verdict"] == "Pass", rows
    print(f"hot update: in place {in_place['measured']}, rollout {rolled['measured']}")
    faults = {f["id"]: f for f in status["faults"]}
    assert all(f["phase"] == "Reverted" for f in faults.values()), faults
    # the in-place update touched no pod template: the Deployment changed only for the rollout and
    # its revert
    assert int(kube.get("deployment", "refserver")["metadata"]["generation"]) == generation + 2
    injected = json.loads(
        kube.run("get", "events", "--field-selector", "reason=FaultInjected", "-o", "json").stdout
    )
    messages = [e["message"] for e in injected["items"]]
    assert any("in-place-0" in m and "reloads it in place" in m for m in messages), messages
