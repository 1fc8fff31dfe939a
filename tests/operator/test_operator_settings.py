"""Where the operator runs, as its settings read it from the environment: in a pod (what the
Kubernetes client's in-cluster config needs) or outside the cluster with a kubeconfig."""

from __future__ import annotations

from pathlib import Path

from mcp_operator.settings import cluster_domain_from_env, in_cluster


def test_a_pod_is_in_the_cluster_by_its_service_host_or_its_token(tmp_path: Path) -> None:
    absent, token = tmp_path / "absent", tmp_path / "token"
    token.write_text("eyJ")
    assert in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, absent)
    assert in_cluster({}, token)  # automountServiceAccountToken and no variable: still a pod
    assert not in_cluster({}, absent)  # mcp-operator run with a kubeconfig
    assert not in_cluster({"KUBERNETES_SERVICE_HOST": ""}, absent)


def test_the_cluster_domain_defaults_to_cluster_local() -> None:
    assert cluster_domain_from_env({}) == "cluster.local"
    assert cluster_domain_from_env({"MCP_CLUSTER_DOMAIN": " Corp.Example. "}) == "corp.example"
    assert cluster_domain_from_env({"MCP_CLUSTER_DOMAIN": ""}) == "cluster.local"
