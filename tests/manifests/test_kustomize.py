"""The kustomize install path: the base's Deployment locked down and budgeted, the overlays, and
manifests/monitoring (alerts and dashboard), built with our kubectl's `kustomize`."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from .conftest import REPO, Run

MONITORING = REPO / "manifests" / "monitoring"


def _build(kubectl: Run, target: str) -> list[dict[str, Any]]:
    out = kubectl("kustomize", str(REPO / target)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


@pytest.mark.parametrize("target", ["manifests/base", "manifests/overlays/dev"])
def test_operator_deployment_is_locked_down_and_budgeted(kubectl: Run, target: str) -> None:
    docs = _build(kubectl, target)
    deployment = _one(docs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert any(v["name"] == "tmp" and "emptyDir" in v for v in spec["volumes"])
    assert "--log-format=json" in container["command"]
    env = {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert float(env["MCP_SHUTDOWN_TIMEOUT_SECONDS"]) < spec["terminationGracePeriodSeconds"]
    # leader election: the Lease held as the pod, in the operator's namespace, through a Role there
    assert (env["POD_NAME"], env["POD_NAMESPACE"]) == ("metadata.name", "metadata.namespace")
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    role = _one(docs, "Role")
    assert role["metadata"]["namespace"] == "mcp-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]
    binding = _one(docs, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "mcp-operator", "namespace": "mcp-system"}
    ]
    pdb = _one(docs, "PodDisruptionBudget")
    assert pdb["metadata"]["namespace"] == "mcp-system" and pdb["spec"]["maxUnavailable"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize(
    "target",
    [
        "manifests/base",
        "manifests/overlays/dev",
        "manifests/overlays/namespaced",
        "manifests/overlays/namespace",
    ],
)
def test_every_binding_names_the_service_account_where_it_is(kubectl: Run, target: str) -> None:
    """An overlay that moves the operator (``overlays/namespace``) must move its bindings'
    subjects too, which kustomize's ``namespace`` alone does not: a binding left behind starts
    the operator without its rights."""
    docs = _build(kubectl, target)
    account = _one(docs, "ServiceAccount")
    namespace = account["metadata"]["namespace"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["metadata"]["namespace"] == namespace
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert bindings
    for binding in bindings:
        subjects = [s for s in binding["subjects"] if s["kind"] == "ServiceAccount"]
        assert subjects == [{"kind": "ServiceAccount", "name": "mcp-operator", "namespace": namespace}], (
            binding
        )
        if binding["kind"] == "RoleBinding" and binding["roleRef"]["name"] == "mcp-operator-leader":
            assert binding["metadata"]["namespace"] == namespace  # where the Lease is


def test_monitoring_has_the_alerts_and_the_dashboard(kubectl: Run) -> None:
    docs = _build(kubectl, "manifests/monitoring")
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "PrometheusRule"]
    rule = _one(docs, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    dashboard = _one(docs, "ConfigMap")
    assert dashboard["metadata"]["name"] == "mcp-operator-dashboard"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["mcp-operator.json"]) == json.loads(
        (MONITORING / "dashboard.json").read_text()
    )


def test_prometheus_operator_overlay_scrapes_alerts_and_shows(kubectl: Run) -> None:
    docs = _build(kubectl, "manifests/overlays/prometheus-operator")
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "ConfigMap"} <= kinds
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} - {None} == {
        "mcp-system"
    }
