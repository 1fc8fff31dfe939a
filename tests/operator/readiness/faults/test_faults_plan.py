"""plan_fault: targets and undo data from the cluster as it is, and every refusal before
anything is touched (no create, patch or delete reaches the API)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.operator.readiness.faults.faultcluster import API, NS, OTHER_NS, Cluster

from mcp_operator.api.drill import FaultPolicy, FaultSpec, PodSelection
from mcp_operator.readiness.faults import FaultRefused, plan_fault, revert_fault

POLICY = FaultPolicy(max_pods=10, max_nodes=2)


def kill(mode: str = "one", value: int = 1, evict: bool = True, **labels: str) -> FaultSpec:
    return FaultSpec(
        kind="podKill",
        pods=PodSelection(match_labels=labels or {"app": "srv"}, mode=mode, value=value),
        evict=evict,
    )


async def refused(
    cluster: Cluster, fault: FaultSpec, namespace: str = NS, policy: FaultPolicy = POLICY
) -> FaultRefused:
    with pytest.raises(FaultRefused) as info:
        await plan_fault(fault, namespace, policy, API)
    assert cluster.writes() == [], "a refused plan touched the cluster"
    return info.value


async def test_pod_kill_takes_running_pods_by_name(cluster: Cluster) -> None:
    cluster.pod("srv-00", phase="Pending")
    cluster.pod("web-0", labels={"app": "web"})
    planned = await plan_fault(kill("count", 2), NS, POLICY, API)
    assert planned.kind == "podKill" and planned.target == "pods ml/srv-0,ml/srv-1"
    assert [p["name"] for p in planned.undo["pods"]] == ["srv-0", "srv-1"]
    assert all(p["uid"] for p in planned.undo["pods"]) and planned.undo["evict"] is True
    assert cluster.writes() == []


async def test_namespace_without_the_label_is_refused_before_anything_is_read(cluster: Cluster) -> None:
    cluster.pod("srv-0", namespace=OTHER_NS)
    exc = await refused(cluster, kill(), OTHER_NS)
    assert exc.reason == "NamespaceNotOptedIn" and "mcp2026.io/fault-injection=enabled" in str(exc)
    assert [(c.verb, c.kind) for c in cluster.fake.calls] == [("read", "Namespace")]


async def test_label_with_another_value_or_a_missing_namespace_is_not_opted_in(cluster: Cluster) -> None:
    cluster.fake.put(
        "Namespace", {"metadata": {"name": "half", "labels": {"mcp2026.io/fault-injection": "true"}}}
    )
    assert (await refused(cluster, kill(), "half")).reason == "NamespaceNotOptedIn"
    exc = await refused(cluster, kill(), "absent")
    assert exc.reason == "NamespaceNotOptedIn" and "does not exist" in str(exc)


@pytest.mark.parametrize(
    "fault",
    [
        kill(app="nothing"),
        FaultSpec(kind="zoneOutage", zone="zone-z"),
        FaultSpec(kind="zoneOutage", zone="a,b=c"),
        FaultSpec(kind="nodeDrain", node="no-such-node"),
    ],
    ids=["selector", "zone", "invalid-zone", "node"],
)
async def test_nothing_selected(cluster: Cluster, fault: FaultSpec) -> None:
    assert (await refused(cluster, fault)).reason == "NothingSelected"


async def test_pods_that_are_not_running_are_not_selected(cluster: Cluster) -> None:
    cluster.pod("job-0", labels={"app": "job"}, phase="Succeeded")
    assert (await refused(cluster, kill(app="job"))).reason == "NothingSelected"


async def test_blast_radius_in_pods(cluster: Cluster) -> None:
    exc = await refused(cluster, kill("all"), policy=FaultPolicy(max_pods=2))
    assert exc.reason == "BlastRadiusExceeded" and "3 pods" in str(exc) and "maxPods (2)" in str(exc)
    assert (await refused(cluster, kill(), policy=FaultPolicy(max_pods=0))).reason == "BlastRadiusExceeded"


async def test_blast_radius_in_nodes(cluster: Cluster) -> None:
    exc = await refused(cluster, FaultSpec(kind="zoneOutage", zone="zone-a"), policy=FaultPolicy(max_nodes=1))
    assert exc.reason == "BlastRadiusExceeded" and "2 nodes" in str(exc)


async def test_zone_pods_of_the_namespace_count_against_max_pods(cluster: Cluster) -> None:
    cluster.pod("srv-3", node="node-a2")
    exc = await refused(
        cluster, FaultSpec(kind="zoneOutage", zone="zone-a"), policy=FaultPolicy(max_pods=2, max_nodes=2)
    )
    assert exc.reason == "BlastRadiusExceeded" and "3 pods of ml" in str(exc)


async def test_zone_outage_plans_only_this_namespaces_pods(cluster: Cluster) -> None:
    cluster.namespace("team")
    cluster.pod("theirs", namespace="team", node="node-a1")
    cluster.pod("agent", node="node-a1", owner="DaemonSet")
    cluster.pod("mirror", node="node-a1", owner=None, annotations={"kubernetes.io/config.mirror": "x"})
    cluster.node("node-a3", "zone-a", unschedulable=True)
    planned = await plan_fault(
        FaultSpec(kind="zoneOutage", zone="zone-a"), NS, FaultPolicy(max_pods=2, max_nodes=3), API
    )
    assert planned.undo["nodes"] == ["node-a1", "node-a2", "node-a3"]
    assert planned.undo["cordon"] == ["node-a1", "node-a2"]  # node-a3 was cordoned before: it stays so
    assert [p["name"] for p in planned.undo["pods"]] == ["srv-0", "srv-1"]
    assert planned.target == "nodes node-a1,node-a2,node-a3 (zone-a); 2 pod(s) of ml"


async def test_pods_without_a_controller_are_not_killed(cluster: Cluster) -> None:
    cluster.pod("bare-0", labels={"app": "bare"}, owner=None)
    exc = await refused(cluster, kill(app="bare"))
    assert exc.reason == "PodWithoutController" and "ml/bare-0" not in str(exc) and "bare-0" in str(exc)
    cluster.pod("bare-1", node="node-b1", owner=None)
    assert (
        await refused(cluster, FaultSpec(kind="nodeDrain", node="node-b1"))
    ).reason == "PodWithoutController"


async def test_a_budget_that_allows_no_disruption_refuses_the_eviction_at_plan(cluster: Cluster) -> None:
    cluster.pdb("srv-pdb", {"app": "srv"}, allowed=0)
    exc = await refused(cluster, kill())
    assert exc.reason == "EvictionRefused" and "PodDisruptionBudget ml/srv-pdb allows 0" in str(exc)
    assert (await refused(cluster, FaultSpec(kind="nodeDrain", node="node-a1"))).reason == "EvictionRefused"


async def test_a_budget_is_checked_against_every_pod_it_covers(cluster: Cluster) -> None:
    cluster.pdb("srv-pdb", {"app": "srv"}, allowed=1)
    await plan_fault(kill("one"), NS, POLICY, API)
    assert (await refused(cluster, kill("count", 2))).reason == "EvictionRefused"


async def test_a_stale_budget_or_a_delete_is_left_to_the_api(cluster: Cluster) -> None:
    cluster.pdb("stale", {"app": "srv"}, allowed=0, current=False)
    await plan_fault(kill(), NS, POLICY, API)
    cluster.pdb("srv-pdb", {"app": "srv"}, allowed=0)
    planned = await plan_fault(kill(evict=False), NS, POLICY, API)  # a delete is not an eviction
    assert planned.undo["evict"] is False


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (FaultSpec(kind="scaleDown", workload="absent"), "WorkloadNotFound"),
        (FaultSpec(kind="rolloutRestart", workload="absent"), "WorkloadNotFound"),
        (
            FaultSpec(kind="configHotUpdate", config_map="absent", data={"k": "v"}, workload="srv"),
            "ConfigMapNotFound",
        ),
        (
            FaultSpec(kind="configHotUpdate", config_map="srv-config", data={"k": "v"}, workload="absent"),
            "WorkloadNotFound",
        ),
    ],
)
async def test_missing_objects(cluster: Cluster, fault: FaultSpec, reason: str) -> None:
    cluster.config_map()
    assert (await refused(cluster, fault)).reason == reason


async def test_scale_down_counts_the_pods_it_removes(cluster: Cluster) -> None:
    cluster.deployment(replicas=5)
    exc = await refused(
        cluster, FaultSpec(kind="scaleDown", workload="srv", replicas=1), policy=FaultPolicy(max_pods=3)
    )
    assert exc.reason == "BlastRadiusExceeded" and "4 pods" in str(exc)
    exc = await refused(cluster, FaultSpec(kind="scaleDown", workload="srv", replicas=5))
    assert exc.reason == "NothingSelected"


async def test_undo_is_the_state_before_the_fault(cluster: Cluster) -> None:
    cluster.deployment(
        replicas=4, annotations={"checksum/config": "old", "kubectl.kubernetes.io/restartedAt": "t0"}
    )
    cluster.config_map(data={"mode": "v1", "other": "x"})
    scale = await plan_fault(FaultSpec(kind="scaleDown", workload="srv", replicas=1), NS, POLICY, API)
    assert scale.undo == {"namespace": NS, "workload": "srv", "replicas": 4, "to": 1}
    assert scale.target == "Deployment ml/srv (4 to 1 replicas)"
    restart = await plan_fault(FaultSpec(kind="rolloutRestart", workload="srv"), NS, POLICY, API)
    assert restart.undo["previous"] == "t0" and restart.target == "Deployment ml/srv"
    hot = await plan_fault(
        FaultSpec(
            kind="configHotUpdate", config_map="srv-config", data={"mode": "v2", "new": "1"}, workload="srv"
        ),
        NS,
        POLICY,
        API,
    )
    assert hot.undo["data"] == {"mode": "v1", "new": None} and hot.undo["previous"] == "old"
    assert hot.undo["set"] == {"mode": "v2", "new": "1"}
    assert cluster.writes() == []


async def test_unknown_kinds_are_refused() -> None:
    fault: Any = FaultSpec.model_construct(kind="netSplit")
    with pytest.raises(FaultRefused) as info:
        await plan_fault(fault, NS, POLICY, API)
    assert info.value.reason == "UnknownFaultKind"
    with pytest.raises(FaultRefused, match="unknown fault kind"):
        await revert_fault("netSplit", {}, API)
