"""The operator's ClusterRole covers what the faults call, and nothing wider than they need:
Deployments are patched (never updated, created or deleted), nodes are never created or
deleted, pods are never updated or patched. (Pods are created, but only by the benchmark's
serving-GPU samplers, never by a fault.)"""

from __future__ import annotations

import pytest

from mcp_operator.rbac import OPERATOR_RULES


def _allowed(group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in OPERATOR_RULES
    )


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
def test_the_faults_are_allowed_what_they_call(group: str, resource: str, verbs: list[str]) -> None:
    for verb in verbs:
        assert _allowed(group, resource, verb), (group, resource, verb)


@pytest.mark.parametrize(
    ("group", "resource", "verbs"),
    [
        ("apps", "deployments", ["create", "update", "delete"]),
        ("", "nodes", ["create", "update", "delete"]),
        ("", "pods", ["update", "patch"]),
        ("policy", "poddisruptionbudgets", ["create", "update", "patch", "delete"]),
        ("autoscaling", "horizontalpodautoscalers", ["create", "update", "patch", "delete"]),
        ("chaos-mesh.org", "networkchaos", ["update", "patch", "list"]),
    ],
)
def test_nothing_wider(group: str, resource: str, verbs: list[str]) -> None:
    for verb in verbs:
        assert not _allowed(group, resource, verb), (group, resource, verb)
