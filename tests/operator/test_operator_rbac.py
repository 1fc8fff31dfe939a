"""The operator's ClusterRole: enough to do its job, including granting each run's shard Role.

Kubernetes refuses to let an account create a Role that grants more than it holds itself
(escalation prevention), so the operator's rules must cover every rule of the shard Role.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.api import GROUP
from mcp_operator.benchmark.run import shard_role
from mcp_operator.rbac import OPERATOR_RULES, cluster_role


def _allowed(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and (verb in r["verbs"] or "*" in r["verbs"])
        for r in rules
    )


def test_operator_holds_everything_the_shard_role_grants() -> None:
    role = shard_role(benchmark="b", uid="u", job="b-1", shards=2)
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert _allowed(OPERATOR_RULES, group, resource, verb), (group, resource, verb)


@pytest.mark.parametrize(
    ("group", "resource", "verbs"),
    [
        (GROUP, "mcpreadinesses", ["get", "list", "watch", "patch"]),
        (GROUP, "mcpbenchmarks", ["get", "list", "watch", "patch"]),
        (GROUP, "mcpreadinesses/status", ["patch"]),
        (GROUP, "mcpbenchmarks/status", ["patch"]),
        ("batch", "jobs", ["create", "get", "list", "watch", "patch", "delete"]),
        ("", "configmaps", ["create", "get", "list", "update"]),
        ("", "services", ["get"]),
        ("", "events", ["create", "list"]),  # list: a new leader's lost verdict events (verdictevents)
        ("", "serviceaccounts", ["create"]),
        ("", "secrets", ["create", "get"]),  # each run's key: created, then read back to verify
        ("rbac.authorization.k8s.io", "roles", ["create"]),
        ("rbac.authorization.k8s.io", "rolebindings", ["create"]),
    ],
)
def test_operator_can_do_its_job(group: str, resource: str, verbs: list[str]) -> None:
    for verb in verbs:
        assert _allowed(OPERATOR_RULES, group, resource, verb), (group, resource, verb)


@pytest.mark.parametrize(
    ("group", "resource", "verbs"),
    [
        # MCPReadiness configConsistency: the workload, its ReplicaSets and pods, the hashed
        # ConfigMaps and Secrets (by name), and the Argo CD Application the gate names
        ("apps", "deployments", ["get", "list"]),
        ("apps", "replicasets", ["get", "list"]),
        ("apps", "statefulsets", ["get", "list"]),
        ("", "pods", ["get", "list"]),
        ("", "configmaps", ["get"]),
        ("", "secrets", ["get"]),
        ("argoproj.io", "applications", ["get"]),
    ],
)
def test_operator_can_read_what_readiness_checks_read(group: str, resource: str, verbs: list[str]) -> None:
    for verb in verbs:
        assert _allowed(OPERATOR_RULES, group, resource, verb), (group, resource, verb)


def test_readiness_check_reads_are_read_only() -> None:
    for group, resource in (  # Deployments are patched by drill faults: tests/operator/readiness/faults
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("argoproj.io", "applications"),
    ):
        for verb in ("create", "update", "patch", "delete", "watch"):
            assert not _allowed(OPERATOR_RULES, group, resource, verb), (group, resource, verb)


def test_no_wildcards_and_secrets_only_by_name() -> None:
    for rule in OPERATOR_RULES:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    # the operator reads back the run keys it created, by name; it cannot enumerate or watch Secrets
    assert not any(
        _allowed(OPERATOR_RULES, "", "secrets", v) for v in ("list", "watch", "update", "patch", "delete")
    )
    assert not any(
        _allowed(OPERATOR_RULES, "rbac.authorization.k8s.io", "roles", v) for v in ("escalate", "bind")
    )


def test_cluster_role_shape() -> None:
    role = cluster_role()
    assert role["kind"] == "ClusterRole" and role["metadata"]["name"] == "mcp-operator"
    assert role["rules"] == OPERATOR_RULES
