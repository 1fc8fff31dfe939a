"""The faults' rights: the operator's own rules (work and cluster reads) never cover what a fault
changes; the fault ClusterRoles cover exactly what the faults call and nothing wider; and a
fault whose rights are missing in its namespace is refused (FaultNotPermitted, naming the right
and the binding to create) before anything is touched."""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.readiness.faults.faultcluster import API, NS, Cluster

from mcp_operator.api.drill import FaultPolicy, FaultSpec, PodSelection
from mcp_operator.rbac import FAULT_RULES, NODE_FAULT_RULES, OPERATOR_RULES, Rule
from mcp_operator.readiness.faults.base import FaultRefused
from mcp_operator.readiness.faults.lifecycle import plan_fault
from mcp_operator.readiness.faults.safety import fault_rights

FAULT_ROLES = [*OPERATOR_RULES, *FAULT_RULES, *NODE_FAULT_RULES]


def _allowed(rules: list[Rule], group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


@pytest.mark.parametrize(
    ("group", "resource", "verbs"),
    [
        ("", "namespaces", ["get"]),  # the opt-in label
        ("", "pods", ["list", "delete"]),
        ("", "pods/eviction", ["create"]),
        ("", "nodes", ["get", "list", "patch"]),
        ("apps", "deployments", ["get", "patch"]),
        ("apps", "deployments/scale", ["get", "patch"]),
        ("", "configmaps", ["get", "patch"]),
        ("policy", "poddisruptionbudgets", ["list"]),
        ("", "configmaps", ["create", "patch", "delete"]),  # the write probe of etcdLeaderMove
        ("autoscaling", "horizontalpodautoscalers", ["list"]),
        ("chaos-mesh.org", "networkchaos", ["get", "create", "delete"]),
        ("chaos-mesh.org", "stresschaos", ["get", "create", "delete"]),
        ("chaos-mesh.org", "podchaos", ["get", "create", "delete"]),
    ],
)
def test_the_fault_roles_allow_what_the_faults_call(group: str, resource: str, verbs: list[str]) -> None:
    for verb in verbs:
        assert _allowed(FAULT_ROLES, group, resource, verb), (group, resource, verb)


@pytest.mark.parametrize(
    ("group", "resource", "verb"),
    [
        ("", "pods", "delete"),
        ("", "pods/eviction", "create"),
        ("", "nodes", "patch"),
        ("apps", "deployments", "patch"),
        ("apps", "deployments/scale", "patch"),
        ("chaos-mesh.org", "networkchaos", "create"),
    ],
)
def test_an_install_alone_grants_no_fault_right(group: str, resource: str, verb: str) -> None:
    assert not _allowed(OPERATOR_RULES, group, resource, verb)


@pytest.mark.parametrize(
    ("group", "resource", "verbs"),
    [
        ("apps", "deployments", ["create", "update", "delete"]),
        ("", "nodes", ["create", "update", "delete"]),
        ("", "pods", ["create", "update", "patch"]),
        ("policy", "poddisruptionbudgets", ["create", "update", "patch", "delete"]),
        ("autoscaling", "horizontalpodautoscalers", ["create", "update", "patch", "delete"]),
        ("chaos-mesh.org", "networkchaos", ["update", "patch", "list"]),
    ],
)
def test_nothing_wider(group: str, resource: str, verbs: list[str]) -> None:
    for verb in verbs:
        assert not _allowed(FAULT_ROLES, group, resource, verb), (group, resource, verb)


def _kill() -> FaultSpec:
    return FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}))


async def test_a_fault_without_its_rights_in_the_namespace_is_refused_untouched(cluster: Cluster) -> None:
    cluster.fake.deny("create", "pods/eviction", NS)
    with pytest.raises(FaultRefused) as refused:
        await plan_fault(_kill(), NS, FaultPolicy(), API)
    assert refused.value.reason == "FaultNotPermitted"
    assert f"create pods/eviction in {NS}" in str(refused.value)
    assert f"kubectl -n {NS} create rolebinding mcp-operator-faults" in str(refused.value)
    assert cluster.writes() == []


async def test_a_cordon_needs_the_node_fault_role_cluster_wide(cluster: Cluster) -> None:
    cluster.fake.deny("patch", "nodes")
    drain = FaultSpec(kind="nodeDrain", node="node-a1")
    with pytest.raises(FaultRefused) as refused:
        await plan_fault(drain, NS, FaultPolicy(max_pods=10, max_nodes=2), API)
    assert refused.value.reason == "FaultNotPermitted"
    assert "patch nodes (cluster-wide)" in str(refused.value)
    assert cluster.writes() == []


async def test_with_the_rights_granted_the_fault_is_planned(cluster: Cluster) -> None:
    planned = await plan_fault(_kill(), NS, FaultPolicy(), API)
    asked = [c for c in cluster.fake.calls if c.kind == "SelfSubjectAccessReview"]
    attributes: list[Any] = sorted(
        (c.body["spec"]["resourceAttributes"]["resource"], c.body["spec"]["resourceAttributes"]["verb"])
        for c in asked
    )
    assert attributes == [("pods", "create"), ("pods", "delete")]  # eviction is pods/eviction
    assert fault_rights(planned)[1] == []


def test_a_right_is_shown_as_kubectl_names_it() -> None:
    from mcp_operator.access import Right

    assert Right("patch", "deployments/scale", "apps").shown("ml") == "patch deployments.apps/scale in ml"
    assert Right("create", "pods/eviction").shown("ml") == "create pods/eviction in ml"
    assert Right("patch", "nodes").shown(None) == "patch nodes (cluster-wide)"
