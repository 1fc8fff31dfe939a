"""The Helm charts against the real API server: a real install of the operator chart (the
Deployment locked down, its PodDisruptionBudget computed and enforced by the disruption
controller, the dashboard ConfigMap), values the schema refuses, and the CRD chart taking over
CRDs that `kubectl apply` created and upgrading them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import build

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "mcp-operator"
CRD_CHART = REPO / "charts" / "mcp-operator-crds"
Helm = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def helm(kube: Any) -> Iterator[Helm]:
    binary = str(build.binary("helm", "helm"))
    releases: list[tuple[str, str]] = []

    def run(*args: str, check: bool = True, namespace: str | None = None) -> subprocess.CompletedProcess[str]:
        ns = namespace or kube.namespace
        argv = [binary, f"--kubeconfig={kube.kubeconfig}", "--namespace", ns, *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
        if args[0] in ("install", "upgrade") and result.returncode == 0:
            releases.append((args[1], ns))
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}:\n{result.stderr}")
        return result

    yield run
    for name, ns in reversed(dict.fromkeys(releases)):
        subprocess.run(
            [binary, f"--kubeconfig={kube.kubeconfig}", "--namespace", ns, "uninstall", name],
            capture_output=True,
            timeout=60,
            check=False,
        )


def _wait_for(what: str, probe: Callable[[], Any], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _evict(kube: Any, pod: str) -> subprocess.CompletedProcess[str]:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": kube.namespace},
    }
    return kube.run(
        "create",
        "--raw",
        f"/api/v1/namespaces/{kube.namespace}/pods/{pod}/eviction",
        "-f",
        "-",
        input_text=json.dumps(body),
        check=False,
    )


def test_chart_installs_a_locked_down_operator_with_a_working_disruption_budget(
    kube: Any, helm: Helm
) -> None:
    helm(
        "install",
        "ops",
        str(CHART),
        "--skip-crds",
        "--set",
        "nodeSelector.type=kwok",  # kwok runs the pod: no image registry here
        "--set",
        "podDisruptionBudget.minAvailable=1",
        "--set",
        "metrics.dashboard.enabled=true",
        "--wait",
        "--timeout",
        "90s",
    )
    deployment = kube.get("deployment", "ops")
    assert deployment["status"]["availableReplicas"] == 1
    spec = deployment["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "--log-format=json" in container["command"]
    assert spec["terminationGracePeriodSeconds"] == 60
    # least privilege by default: it watches, and works in, the release's namespace only
    assert [a for a in container["command"] if a.startswith("--namespace")] == [
        f"--namespace={kube.namespace}"
    ]

    # the leader Lease: the operator's account may hold one in its own namespace and nowhere else
    account = f"system:serviceaccount:{kube.namespace}:ops"
    for verb in ("get", "create", "update"):
        mine = kube.run("auth", "can-i", verb, "leases.coordination.k8s.io", "--as", account, check=False)
        assert mine.stdout.strip() == "yes", (verb, mine.stdout, mine.stderr)
    elsewhere = kube.run(
        "auth",
        "can-i",
        "update",
        "leases.coordination.k8s.io",
        "--as",
        account,
        "-n",
        "kube-node-lease",
        check=False,
    )
    assert elsewhere.stdout.strip() == "no", elsewhere.stdout
    for verb, resource, namespace in [
        ("get", "secrets", kube.namespace),
        ("get", "secrets", "kube-system"),
        ("create", "rolebindings", "kube-system"),
    ]:
        answer = kube.run("auth", "can-i", verb, resource, "--as", account, "-n", namespace, check=False)
        expected = "yes" if namespace == kube.namespace else "no"
        assert answer.stdout.strip() == expected, (verb, resource, namespace, answer.stdout)

    # the disruption controller counts the operator's pod, and the budget holds against eviction
    def budget() -> dict[str, Any] | None:
        status = kube.get("poddisruptionbudget", "ops").get("status") or {}
        return status if status.get("expectedPods") == 1 and status.get("currentHealthy") == 1 else None

    status = _wait_for("the PodDisruptionBudget's status", budget)
    assert status["disruptionsAllowed"] == 0
    pods = json.loads(kube.run("get", "pods", "-l", "app.kubernetes.io/instance=ops", "-o", "json").stdout)
    (pod,) = [p["metadata"]["name"] for p in pods["items"]]
    refused = _evict(kube, pod)
    assert refused.returncode != 0 and "disruption budget" in refused.stderr, refused.stderr

    # the default budget lets a drain move the operator
    helm(
        "upgrade",
        "ops",
        str(CHART),
        "--skip-crds",
        "--set",
        "nodeSelector.type=kwok",
        "--set",
        "metrics.dashboard.enabled=true",
    )
    assert kube.get("poddisruptionbudget", "ops")["spec"]["maxUnavailable"] == 1

    def allowed() -> bool:
        status = kube.get("poddisruptionbudget", "ops").get("status") or {}
        return status.get("disruptionsAllowed") == 1

    _wait_for("the budget to allow one disruption", allowed)
    evicted = _evict(kube, pod)
    assert evicted.returncode == 0, evicted.stderr

    dashboard = kube.get("configmap", "ops-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["mcp-operator.json"])["uid"] == "mcp-operator"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": "two"}, "at '/replicaCount': got string, want integer"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"metrics": {"port": -1}}, "at '/metrics/port': minimum: got -1, want 1"),
        # a glob without the cluster-wide choice: Roles cannot follow a pattern
        ({"watchNamespaces": ["team-*"]}, "watchNamespaces: team-*: a pattern, not a namespace's name"),
    ],
)
def test_install_refuses_invalid_values_and_creates_nothing(
    kube: Any, helm: Helm, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = helm("install", "bad", str(CHART), "--skip-crds", "-f", str(values_file), check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert "bad" not in helm("list", "-q").stdout.split()
    assert kube.run("get", "deployment", "bad", check=False).returncode != 0


def test_crd_chart_adopts_upgrades_and_keeps_the_crds(kube: Any, helm: Helm) -> None:
    """The upgrade path for CRDs: Helm never upgrades a chart's crds/, so the CRD chart holds
    them as templates. CRDs created before (by `kubectl apply -k crds` or the chart's crds/) are
    handed to it as the README says; `helm upgrade` then applies the CRDs of the chart, and
    `helm uninstall` leaves them (and every object of their kinds) in place."""
    names = ["mcpreadinesses.mcp2026.io", "mcpbenchmarks.mcp2026.io"]
    for name in names:
        kube.run("label", "crd", name, "app.kubernetes.io/managed-by=Helm", "--overwrite")
        kube.run(
            "annotate",
            "crd",
            name,
            "meta.helm.sh/release-name=mcp-crds",
            f"meta.helm.sh/release-namespace={kube.namespace}",
            "--overwrite",
        )
    kube.apply(
        yaml.safe_dump(
            {
                "apiVersion": "mcp2026.io/v1alpha1",
                "kind": "MCPReadiness",
                "metadata": {"name": "kept"},
                "spec": {"target": {"url": "http://127.0.0.1:9"}, "suspend": True},
            }
        )
    )
    helm("install", "mcp-crds", str(CRD_CHART))
    helm("upgrade", "mcp-crds", str(CRD_CHART))
    history = helm("history", "mcp-crds", "-o", "json").stdout
    assert [h["status"] for h in json.loads(history)] == ["superseded", "deployed"]
    for name in names:
        crd = json.loads(kube.run("get", "crd", name, "-o", "json").stdout)
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    helm("uninstall", "mcp-crds")
    for name in names:
        assert kube.run("get", "crd", name, check=False).returncode == 0, f"{name} was deleted"
    assert kube.get("mcpreadiness", "kept")["metadata"]["name"] == "kept"
