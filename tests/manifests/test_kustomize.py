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


def _named(docs: list[dict[str, Any]], kind: str, name: str, namespace: str = "mcp-system") -> dict[str, Any]:
    (found,) = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["name"] == name
        and d["metadata"].get("namespace", "") in ("", namespace)
    ]
    return found


def _command(docs: list[dict[str, Any]]) -> list[str]:
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return list(container["command"])


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
    role = _named(docs, "Role", "mcp-operator-leader")
    assert role["metadata"]["namespace"] == "mcp-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]
    binding = _named(docs, "RoleBinding", "mcp-operator-leader")
    assert binding["metadata"]["namespace"] == "mcp-system"
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
        "manifests/overlays/cluster-wide",
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


# the rights that let an account read what is not its own or act as another account
TAKEOVER = {"secrets", "serviceaccounts", "jobs", "roles", "rolebindings"}


def _bound(docs: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(binding kind, namespace) -> the resources the role it binds names."""
    rules = {
        (d["kind"], d["metadata"]["name"]): d["rules"] for d in docs if d["kind"] in ("Role", "ClusterRole")
    }
    bound: dict[tuple[str, str], set[str]] = {}
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ref = binding["roleRef"]
        resources = {r for rule in rules[(ref["kind"], ref["name"])] for r in rule["resources"]}
        key = (binding["kind"], binding["metadata"].get("namespace", ""))
        bound[key] = bound.get(key, set()) | resources
    return bound


def test_the_base_works_in_its_own_namespace_only(kubectl: Run) -> None:
    """The default kustomize install: nothing bound cluster-wide reaches a Secret, a Job or an
    account; its work is a RoleBinding in its own namespace, the one it watches (the pod's own,
    so an overlay's `namespace` moves both)."""
    docs = _build(kubectl, "manifests/base")
    bound = _bound(docs)
    assert not bound[("ClusterRoleBinding", "")] & TAKEOVER, bound
    assert bound[("ClusterRoleBinding", "")] == {"customresourcedefinitions", "namespaces", "nodes"}
    assert TAKEOVER.issubset(bound[("RoleBinding", "mcp-system")])
    assert set(bound) == {("ClusterRoleBinding", ""), ("RoleBinding", "mcp-system")}
    assert [a for a in _command(docs) if a.startswith("--namespace")] == ["--namespace=$(POD_NAMESPACE)"]
    moved = _build(kubectl, "manifests/overlays/namespace")
    assert TAKEOVER.issubset(_bound(moved)[("RoleBinding", "ml-gates")])
    assert "--namespace=$(POD_NAMESPACE)" in _command(moved)


def test_the_namespaced_overlay_adds_a_namespace_and_cluster_wide_is_its_own_overlay(kubectl: Run) -> None:
    namespaced = _build(kubectl, "manifests/overlays/namespaced")
    bound = _bound(namespaced)
    assert not bound[("ClusterRoleBinding", "")] & TAKEOVER
    for namespace in ("default", "mcp-system"):
        assert TAKEOVER.issubset(bound[("RoleBinding", namespace)]), namespace
    assert [a for a in _command(namespaced) if a.startswith("--namespace")] == [
        "--namespace=$(POD_NAMESPACE)",
        "--namespace=default",
    ]
    assert "--verbose" in _command(_build(kubectl, "manifests/overlays/dev"))
    wide = _build(kubectl, "manifests/overlays/cluster-wide")
    assert TAKEOVER.issubset(_bound(wide)[("ClusterRoleBinding", "")])  # the deliberate choice
    assert not [a for a in _command(wide) if a.startswith("--namespace")]  # every namespace
    faults = {"pods/eviction", "deployments/scale"}  # bound by a namespace's owner only
    for docs in (namespaced, wide):
        assert not any(faults & resources for resources in _bound(docs).values())


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
