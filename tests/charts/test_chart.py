"""The Helm charts: lint, what they render by default and with monitoring on, and values the
schema (or the templates) refuse with a message that says which value and why."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_operator import crdgen, rbac

from .conftest import KUBE_VERSION, REPO

CHART = REPO / "charts" / "mcp-operator"
CRD_CHART = REPO / "charts" / "mcp-operator-crds"
MONITORING = REPO / "manifests" / "monitoring"
Helm = Callable[..., subprocess.CompletedProcess[str]]


def _render(helm: Helm, chart: Path = CHART, *args: str) -> list[dict[str, Any]]:
    out = helm("template", "rel", str(chart), "--namespace", "ops", "--kube-version", KUBE_VERSION, *args)
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}


@pytest.mark.parametrize("chart", [CHART, CRD_CHART], ids=lambda p: p.name)
def test_charts_lint_strict(helm: Helm, chart: Path) -> None:
    result = helm("lint", "--strict", str(chart))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_default_deployment_is_locked_down_and_budgeted(helm: Helm) -> None:
    docs = _render(helm)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == [
        *["ClusterRole"] * 4,  # its cluster reads, and three opt-ins left unbound
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        *["Role"] * 2,  # its work in its own namespace, the leader Lease
        *["RoleBinding"] * 2,
        "Service",
        "ServiceAccount",
    ]
    deployment = _one(docs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    # a rollout's new pod waits on standby until the old one gives the leader Lease back
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] == 65532
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # a read-only root, but drills write their load's results under /tmp
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}} in spec["volumes"]
    assert "--log-format=json" in container["command"]
    # the leader Lease: named after the release, held as the pod, in the release's namespace
    env = _env(container)
    assert (env["MCP_LEASE_NAME"], env["POD_NAME"], env["POD_NAMESPACE"]) == (
        "rel",
        "metadata.name",
        "metadata.namespace",
    )
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "rel-leader"]
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "rel-leader"]
    assert role["rules"] == rbac.LEASE_RULES
    assert binding["roleRef"]["name"] == "rel-leader"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rel", "namespace": "ops"}]
    # the operator's own deadline ends before the kubelet's SIGKILL
    assert float(_env(container)["MCP_SHUTDOWN_TIMEOUT_SECONDS"]) < spec["terminationGracePeriodSeconds"]
    pdb = _one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]


def test_values_steer_the_deployment(helm: Helm) -> None:
    docs = _render(
        helm,
        CHART,
        "--set",
        "replicaCount=0,logFormat=text,verbose=true,terminationGracePeriodSeconds=120,shutdownTimeoutSeconds=100",
        "--set",
        "podDisruptionBudget.minAvailable=1,podLabels.team=ml,podAnnotations.note=x",
    )
    deployment = _one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 0
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert "--log-format=text" in container["command"] and "--verbose" in container["command"]
    assert template["spec"]["terminationGracePeriodSeconds"] == 120
    assert _env(container)["MCP_SHUTDOWN_TIMEOUT_SECONDS"] == "100"
    assert template["metadata"]["labels"]["team"] == "ml" and template["metadata"]["annotations"] == {
        "note": "x"
    }
    assert _one(docs, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 1,
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
        "selector": {
            "matchLabels": {"app.kubernetes.io/name": "mcp-operator", "app.kubernetes.io/instance": "rel"}
        },
    }
    assert not [
        d
        for d in _render(helm, CHART, "--set", "podDisruptionBudget.enabled=false")
        if d["kind"] == "PodDisruptionBudget"
    ]
    # more replicas are standbys behind the leader Lease, so the schema allows them
    assert _one(_render(helm, CHART, "--set", "replicaCount=3"), "Deployment")["spec"]["replicas"] == 3


def test_monitoring_objects_when_enabled(helm: Helm) -> None:
    docs = _render(
        helm,
        CHART,
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=kps",
        "--set",
        "metrics.prometheusRule.enabled=true,metrics.prometheusRule.labels.release=kps",
        "--set",
        "metrics.dashboard.enabled=true,metrics.dashboard.namespace=grafana",
    )
    monitor = _one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    service = _one(docs, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "interval": "30s"}]
    rule = _one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"] == yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    dashboard = _one(docs, "ConfigMap")
    assert dashboard["metadata"]["namespace"] == "grafana"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["mcp-operator.json"]) == json.loads(
        (MONITORING / "dashboard.json").read_text()
    )


def test_chart_copies_of_the_monitoring_files_are_equal() -> None:
    """The chart cannot read files outside itself: its copies must not drift from the sources."""
    for name in ("alerts.yaml", "dashboard.json"):
        assert (CHART / "files" / name).read_text() == (MONITORING / name).read_text(), (
            f"cp manifests/monitoring/{name} charts/mcp-operator/files/{name}"
        )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": "two"}, "at '/replicaCount': got string, want integer"),
        ({"replicaCount": -1}, "at '/replicaCount': minimum: got -1, want 0"),
        ({"replicas": 1}, "additional properties 'replicas' not allowed"),
        ({"metrics": {"port": -1}}, "at '/metrics/port': minimum: got -1, want 1"),
        (
            {"metrics": {"port": 9090, "scrape": True}},
            "at '/metrics': additional properties 'scrape' not allowed",
        ),
        ({"image": {"tag": 1.2}}, "at '/image/tag': got number, want string"),
        ({"logFormat": "xml"}, "at '/logFormat'"),
        ({"watchNamespaces": "team-a"}, "at '/watchNamespaces': got string, want array"),
        ({"clusterWide": "yes"}, "at '/clusterWide': got string, want boolean"),
        # a pattern names namespaces nobody listed: Roles cannot follow it, only clusterWide can
        (
            {"watchNamespaces": ["ml", "team-*"]},
            "watchNamespaces: team-*: a pattern, not a namespace's name; the operator holds its "
            "working rights only in namespaces named exactly (a Role in each): name them, or set "
            "clusterWide=true",
        ),
        (
            {"metrics": {"port": 9090, "serviceMonitor": {"interval": "soon"}}},
            "at '/metrics/serviceMonitor/interval'",
        ),
        ({"podDisruptionBudget": {"maxUnavailable": "half"}}, "at '/podDisruptionBudget/maxUnavailable'"),
        (
            {"podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": 1}},
            "podDisruptionBudget: set minAvailable or maxUnavailable, not both",
        ),
        (
            {"shutdownTimeoutSeconds": 60},
            "shutdownTimeoutSeconds (60) must be below terminationGracePeriodSeconds (60)",
        ),
    ],
)
def test_invalid_values_are_refused_with_the_reason(
    helm: Helm, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    """(`helm install` against the real API server refuses them the same way: e2e/test_chart_install.py.)"""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = helm(
        "template", "rel", str(CHART), "--kube-version", KUBE_VERSION, "-f", str(values_file), check=False
    )
    assert result.returncode != 0, result.stdout[:500]
    assert message in result.stderr, result.stderr


def test_schema_describes_every_value() -> None:
    """Every key of values.yaml is in the schema, and the schema forbids the ones it does not know."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        if isinstance(value, dict) and node.get("additionalProperties") is False:
            for key, child in value.items():
                assert key in node["properties"], f"{path}.{key} is not in values.schema.json"
                walk(child, node["properties"][key], f"{path}.{key}")

    assert schema["additionalProperties"] is False
    walk(values, schema, "")


def test_crd_chart_installs_the_generated_crds_and_keeps_them(helm: Helm) -> None:
    """charts/mcp-operator-crds: the CRDs of crds/ as templates (so `helm upgrade` upgrades them),
    with Helm told to keep them on uninstall."""
    docs = _render(helm, CRD_CHART)
    assert sorted(d["metadata"]["name"] for d in docs) == sorted(d.name for d in crdgen.DEFINITIONS)
    for doc in docs:
        assert doc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        definition = next(d for d in crdgen.DEFINITIONS if d.name == doc["metadata"]["name"])
        plain = yaml.safe_load((REPO / "crds" / crdgen.file_name(definition)).read_text())
        del doc["metadata"]["annotations"]
        assert doc == plain
    main_chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    crd_chart = yaml.safe_load((CRD_CHART / "Chart.yaml").read_text())
    assert crd_chart["appVersion"] == main_chart["appVersion"]
    refused = helm(
        "template", "c", str(CRD_CHART), "--kube-version", KUBE_VERSION, "--set", "x=1", check=False
    )
    assert refused.returncode != 0 and "additional properties 'x' not allowed" in refused.stderr


def _roles(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    return {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d.get("rules")
        or d.get("roleRef")
        for d in docs
        if d["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
    }


# the rights that let an account read what is not its own or act as another account
TAKEOVER = [
    ("", "secrets"),
    ("", "serviceaccounts"),
    ("batch", "jobs"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
]


def _grants(rules: list[dict[str, Any]], group: str, resource: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] for r in rules)


def test_the_default_install_works_in_its_own_namespace_only(helm: Helm) -> None:
    """No value set: the work is a Role in the release's namespace, the operator watches that
    namespace only, and nothing bound cluster-wide reaches a Secret, a Job or an account."""
    docs = _render(helm)
    roles = _roles(docs)
    assert ("ClusterRole", "", "rel") not in roles
    assert roles[("Role", "ops", "rel")] == rbac.WORK_RULES
    assert roles[("RoleBinding", "ops", "rel")] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "rel",
    }
    cluster_bound = [ref["name"] for key, ref in roles.items() if key[0] == "ClusterRoleBinding"]
    assert cluster_bound == ["rel-cluster"]
    assert roles[("ClusterRole", "", "rel-cluster")] == rbac.CLUSTER_RULES
    for group, resource in TAKEOVER:
        assert not _grants(rbac.CLUSTER_RULES, group, resource), resource
        assert _grants(rbac.WORK_RULES, group, resource), resource  # so the Role is what grants them
    # every Role and RoleBinding in the release's namespace (the leader's left to it: no namespace)
    assert {key[1] or "ops" for key in roles if key[0] in ("Role", "RoleBinding")} == {"ops"}
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [a for a in container["command"] if a.startswith("--namespace")] == ["--namespace=ops"]


def test_a_cluster_wide_install_is_chosen_binds_its_work_and_no_fault_right(helm: Helm) -> None:
    docs = _render(helm, CHART, "--set", "clusterWide=true")
    roles = _roles(docs)
    assert roles[("ClusterRole", "", "rel")] == rbac.OPERATOR_RULES
    assert roles[("ClusterRoleBinding", "", "rel")]["name"] == "rel"
    assert roles[("ClusterRole", "", "rel-faults")] == rbac.FAULT_RULES
    bound = {ref["name"] for key, ref in roles.items() if key[0].endswith("Binding")}
    assert bound == {"rel", "rel-leader"}  # faults, node faults and samplers defined, never bound
    assert not any(key[0] == "Role" and key[2] == "rel" for key in roles)
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["command"] if a.startswith("--namespace")]  # every namespace


def test_switching_modes_replaces_the_cluster_binding_rather_than_its_role(helm: Helm) -> None:
    """A binding's roleRef cannot change: each mode's ClusterRoleBinding has its own name, so
    `helm upgrade` from a cluster-wide release deletes that binding and creates the other."""
    wide = {k[2]: ref["name"] for k, ref in _roles(_render(helm, CHART, "--set", "clusterWide=true")).items()
            if k[0] == "ClusterRoleBinding"}  # fmt: skip
    narrow = {k[2]: ref["name"] for k, ref in _roles(_render(helm)).items() if k[0] == "ClusterRoleBinding"}
    assert wide == {"rel": "rel"} and narrow == {"rel-cluster": "rel-cluster"}


def test_watched_namespaces_get_roles_and_only_cluster_reads_stay_cluster_wide(helm: Helm) -> None:
    roles = _roles(
        _render(helm, CHART, "--set", "watchNamespaces={a,b}", "--set", "rbac.faultNamespaces={a}")
    )
    assert ("ClusterRole", "", "rel") not in roles
    assert roles[("ClusterRoleBinding", "", "rel-cluster")]["name"] == "rel-cluster"
    assert roles[("ClusterRole", "", "rel-cluster")] == rbac.CLUSTER_RULES
    for ns in ("a", "b"):
        assert roles[("Role", ns, "rel")] == rbac.WORK_RULES
        assert roles[("RoleBinding", ns, "rel")] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "rel",
        }
    assert ("Role", "ops", "rel") not in roles  # the release's namespace only when listed
    assert roles[("RoleBinding", "a", "rel-faults")]["name"] == "rel-faults"
    assert ("RoleBinding", "b", "rel-faults") not in roles
    assert not any(key[2] == "rel-node-faults" and key[0].endswith("Binding") for key in roles)


def test_globbed_namespaces_need_the_cluster_wide_choice_and_node_faults_are_opt_in(helm: Helm) -> None:
    docs = _render(
        helm, CHART, "--set", "clusterWide=true,rbac.nodeFaults=true", "--set", "watchNamespaces={team-*}"
    )
    roles = _roles(docs)
    assert roles[("ClusterRoleBinding", "", "rel")]["name"] == "rel"
    assert not any(key[0] == "Role" and key[2] == "rel" for key in roles)
    assert roles[("ClusterRoleBinding", "", "rel-node-faults")]["name"] == "rel-node-faults"
    (container,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--namespace=team-*" in container["command"]
