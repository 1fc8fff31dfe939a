"""The install paths users take: the kustomize base and the Helm chart, against the real API
server (server-side dry run validates every object against the live schemas)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mcp_devcluster import build, stack

REPO = Path(__file__).resolve().parents[1]


def test_kustomize_base_and_overlay_pass_server_side_validation(kube: Any) -> None:
    # a dry run cannot create the namespace its other objects go into, so it must exist
    stack.kubectl(kube.kubeconfig, "create", "namespace", "mcp-system", check=False)
    working_rights = {  # where each install's working rights are: its namespace, a Role, everywhere
        "manifests/base": "rolebinding.rbac.authorization.k8s.io/mcp-operator serverside-applied",
        "manifests/overlays/dev": "role.rbac.authorization.k8s.io/mcp-operator serverside-applied",
        "manifests/overlays/namespaced": "role.rbac.authorization.k8s.io/mcp-operator serverside-applied",
        "manifests/overlays/cluster-wide": "clusterrolebinding.rbac.authorization.k8s.io/mcp-operator "
        "serverside-applied",
    }
    for target, rights in working_rights.items():
        rendered = kube.run("kustomize", str(REPO / target)).stdout
        applied = stack.kubectl(
            kube.kubeconfig,
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            "-",
            input_text=rendered,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        assert "deployment.apps/mcp-operator serverside-applied (server dry run)" in applied.stdout
        assert f"{rights} (server dry run)" in applied.stdout.splitlines()
        faults = "clusterrole.rbac.authorization.k8s.io/mcp-operator-faults serverside-applied"
        assert faults in applied.stdout
        # who is bound to what: on the rendered objects (tests/manifests) and by the API server's
        # own answers (test_least_privilege.py::test_the_kustomize_base_works_in_its_own_namespace_only)


def test_helm_chart_installs_and_rolls_out(kube: Any) -> None:
    helm = str(build.binary("helm", "helm"))
    team = f"{kube.namespace}-team"  # a watched namespace gets the operator's Role: it must exist
    stack.kubectl(kube.kubeconfig, "create", "namespace", team)
    env_args = [f"--kubeconfig={kube.kubeconfig}", "--namespace", kube.namespace]
    install = subprocess.run(
        [
            helm,
            "install",
            "gate",
            str(REPO / "charts" / "mcp-operator"),
            *env_args,
            "--skip-crds",
            "--set",
            "nodeSelector.type=kwok",
            "--set",
            f"watchNamespaces={{{team}}}",
            "--wait",
            "--timeout",
            "90s",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    try:
        deployment = kube.get("deployment", "gate")
        assert deployment["status"]["availableReplicas"] == 1
        command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
        assert f"--namespace={team}" in command
        role = json.loads(
            stack.kubectl(kube.kubeconfig, "-n", team, "get", "role", "gate", "-o", "json").stdout
        )
        assert any("mcpbenchmarks/status" in rule["resources"] for rule in role["rules"])
        reads = json.loads(kube.run("get", "clusterrole", "gate-cluster", "-o", "json").stdout)
        assert not any("mcpbenchmarks/status" in rule["resources"] for rule in reads["rules"])
    finally:
        subprocess.run([helm, "uninstall", "gate", *env_args], capture_output=True, timeout=60, check=False)
        stack.kubectl(kube.kubeconfig, "delete", "namespace", team, "--wait=false", check=False)
