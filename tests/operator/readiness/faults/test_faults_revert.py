"""inject_fault and revert_fault for every kind against the in-memory API: what is applied,
that revert restores exactly the state before, and that revert is idempotent: called twice,
called for a fault that was only planned, and after an injection that stopped half way."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException
from tests.operator.readiness.faults.faultcluster import API, NS, Cluster

from mcp_operator.api.drill import OUTAGE_ANNOTATION, FaultPolicy, FaultSpec, PodSelection
from mcp_operator.readiness.faults import FaultRefused, PlannedFault, inject_fault, plan_fault, revert_fault
from mcp_operator.readiness.faults.hotupdate import content_hash

POLICY = FaultPolicy(max_pods=10, max_nodes=3)
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


async def plan(fault: FaultSpec) -> PlannedFault:
    return await plan_fault(fault, NS, POLICY, API)


async def revert(planned: PlannedFault) -> str:
    """Revert from the journal's form of the undo data (a JSON string), as the operator does."""
    return await revert_fault(planned.kind, json.loads(json.dumps(planned.undo)), API)


async def test_pod_kill_evicts_with_uid_preconditions_and_has_nothing_to_revert(cluster: Cluster) -> None:
    planned = await plan(
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}, mode="count", value=2))
    )
    message = await inject_fault(planned, API)
    assert message == "evicted 2 pod(s) of ml: srv-0,srv-1"
    assert cluster.pods() == ["srv-2"]
    evictions = cluster.fake.calls_to("create", "Eviction")
    assert [c.name for c in evictions] == ["srv-0", "srv-1"]
    assert evictions[0].body["deleteOptions"]["preconditions"]["uid"] == planned.undo["pods"][0]["uid"]
    before = len(cluster.writes())
    for _ in range(2):
        assert "replaced by their controller" in await revert(planned)
    assert len(cluster.writes()) == before


async def test_pod_kill_deletes_when_not_evicting(cluster: Cluster) -> None:
    planned = await plan(
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}), evict=False)
    )
    assert await inject_fault(planned, API) == "deleted 1 pod(s) of ml: srv-0"
    assert (
        cluster.writes() == [("delete", "Pod", "srv-0")] and cluster.fake.calls_to("create", "Eviction") == []
    )


async def test_a_pod_replaced_under_its_name_since_the_plan_is_left_alone(cluster: Cluster) -> None:
    planned = await plan(
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}, mode="count", value=2))
    )
    cluster.fake.objects.pop(("Pod", NS, "srv-0"))
    cluster.pod("srv-0")  # a new uid, as a StatefulSet's re-created pod
    message = await inject_fault(planned, API)
    assert message == "evicted 1 pod(s) of ml: srv-1; already gone or replaced: srv-0"
    assert cluster.pods() == ["srv-0", "srv-2"]


async def test_an_eviction_refused_part_way_is_reported_and_not_forced(cluster: Cluster) -> None:
    planned = await plan(
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}, mode="all"))
    )
    cluster.fake.refuse("create", "Eviction", 429, name="srv-1")
    with pytest.raises(FaultRefused) as info:
        await inject_fault(planned, API)
    assert info.value.reason == "EvictionRefused"
    assert "ml/srv-1 was refused" in str(info.value) and "already evicted: srv-0" in str(info.value)
    assert cluster.pods() == ["srv-1", "srv-2"]  # srv-2 was not tried after the refusal
    assert cluster.fake.calls_to("delete", "Pod") == []


async def test_zone_outage_cordons_and_evicts_then_uncordons_exactly_what_it_cordoned(
    cluster: Cluster,
) -> None:
    cluster.node("node-a3", "zone-a", unschedulable=True)
    cluster.namespace("team")
    cluster.pod("theirs", namespace="team", node="node-a1")
    planned = await plan(FaultSpec(kind="zoneOutage", zone="zone-a"))
    message = await inject_fault(planned, API)
    assert message == "cordoned node-a1,node-a2; evicted 2 pod(s) of ml: srv-0,srv-1"
    assert [cluster.unschedulable(n) for n in ("node-a1", "node-a2", "node-a3", "node-b1")] == [
        True,
        True,
        True,
        False,
    ]
    assert cluster.pods() == ["srv-2"] and cluster.pods("team") == ["theirs"]
    assert (
        await revert(planned) == "uncordoned node-a1,node-a2; evicted pods are replaced by their controllers"
    )
    assert [cluster.unschedulable(n) for n in ("node-a1", "node-a2", "node-a3")] == [False, False, True]
    writes = len(cluster.writes())
    assert (await revert(planned)).startswith("no node left cordoned")
    assert len(cluster.writes()) == writes


async def test_node_drain_is_one_node(cluster: Cluster) -> None:
    planned = await plan(FaultSpec(kind="nodeDrain", node="node-b1", evict=False))
    assert planned.target == "nodes node-b1; 1 pod(s) of ml"
    assert await inject_fault(planned, API) == "cordoned node-b1; deleted 1 pod(s) of ml: srv-2"
    assert cluster.unschedulable("node-b1") and cluster.pods() == ["srv-0", "srv-1"]
    await revert(planned)
    assert not cluster.unschedulable("node-b1")


async def test_cordon_then_a_refused_eviction_still_uncordons_on_revert(cluster: Cluster) -> None:
    planned = await plan(FaultSpec(kind="zoneOutage", zone="zone-a"))
    cluster.fake.refuse("create", "Eviction", 429, name="srv-1")
    with pytest.raises(FaultRefused) as info:
        await inject_fault(planned, API)
    assert info.value.reason == "EvictionRefused" and str(info.value).startswith("cordoned node-a1,node-a2;")
    assert cluster.unschedulable("node-a1") and cluster.pods() == ["srv-1", "srv-2"]
    await revert(planned)
    assert not cluster.unschedulable("node-a1") and not cluster.unschedulable("node-a2")


async def test_cordon_then_a_failing_eviction_still_uncordons_on_revert(cluster: Cluster) -> None:
    planned = await plan(FaultSpec(kind="zoneOutage", zone="zone-a"))
    cluster.fake.refuse("create", "Eviction", 403)
    with pytest.raises(ApiException):
        await inject_fault(planned, API)
    assert cluster.unschedulable("node-a1")
    await revert(planned)
    assert not cluster.unschedulable("node-a1") and not cluster.unschedulable("node-a2")


async def test_a_failed_cordon_of_the_second_node_is_undone_for_the_first(cluster: Cluster) -> None:
    planned = await plan(FaultSpec(kind="zoneOutage", zone="zone-a"))
    cluster.fake.refuse("patch", "Node", 409, name="node-a2")
    with pytest.raises(ApiException):
        await inject_fault(planned, API)
    assert cluster.unschedulable("node-a1") and cluster.pods() == ["srv-0", "srv-1", "srv-2"]
    assert await revert(planned) == "uncordoned node-a1; evicted pods are replaced by their controllers"


async def test_revert_of_a_planned_only_fault_changes_nothing(cluster: Cluster) -> None:
    cluster.deployment(replicas=3, annotations={"checksum/config": "old"})
    cluster.config_map(data={"mode": "v1"})
    faults = [
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"})),
        FaultSpec(kind="zoneOutage", zone="zone-a"),
        FaultSpec(kind="nodeDrain", node="node-b1"),
        FaultSpec(kind="scaleDown", workload="srv", replicas=0),
        FaultSpec(kind="rolloutRestart", workload="srv"),
        FaultSpec(kind="configHotUpdate", config_map="srv-config", data={"mode": "v2"}, workload="srv"),
    ]
    for fault in faults:
        planned = await plan(fault)
        await revert(planned)
        await revert(planned)
    assert cluster.writes() == []


async def test_scale_down_and_back(cluster: Cluster) -> None:
    cluster.deployment(replicas=3)
    planned = await plan(FaultSpec(kind="scaleDown", workload="srv", replicas=1))
    assert await inject_fault(planned, API) == "scaled Deployment ml/srv from 3 to 1 replicas"
    assert cluster.fake.get("Deployment", NS, "srv")["spec"]["replicas"] == 1  # type: ignore[index]
    assert await revert(planned) == "restored Deployment ml/srv to 3 replicas (was 1)"
    assert await revert(planned) == "Deployment ml/srv has its 3 replicas"
    assert cluster.fake.get("Deployment", NS, "srv")["spec"]["replicas"] == 3  # type: ignore[index]
    assert [w[:2] for w in cluster.writes()] == [("patch", "Scale"), ("patch", "Scale")]


@pytest.mark.parametrize("previous", ["2026-01-01T00:00:00Z", None])
async def test_rollout_restart_and_its_revert(cluster: Cluster, previous: str | None) -> None:
    cluster.deployment(annotations={RESTARTED_AT: previous} if previous else {"other": "kept"})
    planned = await plan(FaultSpec(kind="rolloutRestart", workload="srv"))
    assert "a rollout replaces every pod" in await inject_fault(planned, API)
    stamped = cluster.template_annotations()[RESTARTED_AT]
    assert stamped != previous
    message = await revert(planned)
    assert "this starts another rollout" in message
    assert cluster.template_annotations().get(RESTARTED_AT) == previous
    if previous is None:
        assert cluster.template_annotations() == {"other": "kept"}
    assert "nothing to restore" in await revert(planned)


async def test_config_hot_update_and_its_revert(cluster: Cluster) -> None:
    cluster.deployment(annotations={"checksum/config": "old", "other": "kept"})
    cluster.config_map(data={"mode": "v1", "untouched": "x"})
    planned = await plan(
        FaultSpec(
            kind="configHotUpdate", config_map="srv-config", data={"mode": "v2", "added": "1"}, workload="srv"
        )
    )
    message = await inject_fault(planned, API)
    config = cluster.fake.get("ConfigMap", NS, "srv-config")
    assert config is not None and config["data"] == {"mode": "v2", "added": "1", "untouched": "x"}
    patched = cluster.fake.core.read_namespaced_config_map("srv-config", NS)
    digest = content_hash(patched)
    assert cluster.template_annotations() == {"checksum/config": digest, "other": "kept"}
    assert digest[:12] in message and "rolls it out" in message
    message = await revert(planned)
    assert "restored added,mode of ConfigMap ml/srv-config" in message and "another rollout" in message
    config = cluster.fake.get("ConfigMap", NS, "srv-config")
    assert config is not None and config["data"] == {"mode": "v1", "untouched": "x"}
    assert cluster.template_annotations() == {"checksum/config": "old", "other": "kept"}
    writes = len(cluster.writes())
    assert await revert(planned) == (
        "ConfigMap ml/srv-config has its previous data; Deployment ml/srv has its previous checksum/config"
    )
    assert len(cluster.writes()) == writes


async def test_config_hot_update_half_injected_is_reverted(cluster: Cluster) -> None:
    cluster.deployment()
    cluster.config_map(data={"mode": "v1"})
    planned = await plan(
        FaultSpec(kind="configHotUpdate", config_map="srv-config", data={"mode": "v2"}, workload="srv")
    )
    cluster.fake.refuse("patch", "Deployment", 422)
    with pytest.raises(ApiException):
        await inject_fault(planned, API)
    cluster.fake.refusals.clear()
    assert "restored mode of ConfigMap" in await revert(planned)
    assert cluster.fake.get("ConfigMap", NS, "srv-config")["data"] == {"mode": "v1"}  # type: ignore[index]
    assert "checksum/config" not in cluster.template_annotations()


async def test_revert_when_the_objects_are_gone(cluster: Cluster) -> None:
    cluster.deployment()
    cluster.config_map(data={"mode": "v1"})
    scale = await plan(FaultSpec(kind="scaleDown", workload="srv", replicas=0))
    hot = await plan(
        FaultSpec(kind="configHotUpdate", config_map="srv-config", data={"mode": "v2"}, workload="srv")
    )
    drain = await plan(FaultSpec(kind="nodeDrain", node="node-a1"))
    await inject_fault(drain, API)
    cluster.fake.objects.pop(("Deployment", NS, "srv"))
    cluster.fake.objects.pop(("ConfigMap", NS, "srv-config"))
    cluster.fake.objects.pop(("Node", "", "node-a1"))
    assert await revert(scale) == "Deployment ml/srv is gone; nothing to restore"
    assert await revert(hot) == "ConfigMap ml/srv-config is gone; Deployment ml/srv is gone"
    assert "nodes gone: node-a1" in await revert(drain)


async def test_undo_data_that_is_not_whole_fails_by_name(cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="'replicas' should be int"):
        await revert_fault("scaleDown", {"namespace": NS, "workload": "srv"}, API)
    with pytest.raises(ValueError, match="'cordon'"):
        await revert_fault("zoneOutage", {"namespace": NS}, API)


def _annotated(cluster: Cluster, node: str) -> bool:
    obj = cluster.fake.get("Node", "", node)
    assert obj is not None
    return OUTAGE_ANNOTATION in (obj["metadata"].get("annotations") or {})


async def test_nodes_down_annotates_waits_for_not_ready_and_says_when_no_agent_acted(
    cluster: Cluster,
) -> None:
    """nodesDown never cordons or evicts: it asks each node to go down and is injected only once
    the cluster sees them NotReady; nodes that stay Ready (no outage agent) are OutageNotTaken,
    and the revert takes the annotation away again."""
    fault = FaultSpec(kind="zoneOutage", zone="zone-a", outage="nodesDown", outage_timeout_seconds=0.6)
    planned = await plan_fault(fault, NS, FaultPolicy(max_nodes=2), API)
    assert planned.undo["outage"] == "nodesDown" and planned.undo["cordon"] == []
    assert planned.target == "nodes node-a1,node-a2 (zone-a) down; 2 pod(s) of ml on them"
    for node in ("node-a1", "node-a2"):
        cluster.fake.set_status("Node", "", node, {"conditions": [{"type": "Ready", "status": "True"}]})
    with pytest.raises(FaultRefused) as refused:
        await inject_fault(planned, API)
    assert refused.value.reason == "OutageNotTaken" and "still Ready" in str(refused.value)
    assert _annotated(cluster, "node-a1") and not cluster.unschedulable("node-a1")
    assert ("create", "Eviction", "srv-0") not in cluster.writes()
    assert (await revert_fault("zoneOutage", planned.undo, API)).startswith(
        "brought node-a1,node-a2 back up;"
    )
    assert not _annotated(cluster, "node-a1") and not _annotated(cluster, "node-a2")
    # the cluster sees them go: injected
    for node in ("node-a1", "node-a2"):
        cluster.fake.set_status("Node", "", node, {"conditions": [{"type": "Ready", "status": "Unknown"}]})
    assert (await inject_fault(planned, API)).startswith("nodes node-a1,node-a2 down: NotReady")
    assert (await revert_fault("zoneOutage", planned.undo, API)).startswith("brought")
    assert (await revert_fault("zoneOutage", planned.undo, API)).startswith("no node left down;")
