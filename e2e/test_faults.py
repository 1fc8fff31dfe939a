"""Drill faults against the real kube-apiserver, controller manager and scheduler: plan,
inject and revert of every kind, checked through the API.

The pods run on the kwok node ``kwok-cpu-0`` (nodeSelector ``type=kwok``; the GPU nodes' taint
keeps them off those), so kwok plays their kubelet: enough to see cordon, eviction, deletion,
scaling and pod-template changes happen and be undone. The zone outage takes a zone of the
test's own (a label put on ``kwok-cpu-0`` and taken off again), so the local nodes' zones, where
other tests run real processes, are never cordoned.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from mcp_checks.config import ConfigContent, config_hash
from mcp_devcluster import stack
from mcp_operator.api.drill import FAULT_OPT_IN_LABEL, FaultPolicy, FaultSpec, PodSelection
from mcp_operator.readiness.faults import FaultRefused, inject_fault, plan_fault, revert_fault

NODE = "kwok-cpu-0"
ZONE_LABEL = "topology.kubernetes.io/zone"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
POLICY = FaultPolicy(max_pods=10, max_nodes=1)


class Space:
    """One namespace of the test, with the Python client of the cluster."""

    def __init__(self, api: client.ApiClient, name: str) -> None:
        self.api, self.name = api, name
        self.core, self.apps = client.CoreV1Api(api), client.AppsV1Api(api)

    def deployment(
        self, name: str = "srv", replicas: int = 2, annotations: dict[str, str] | None = None
    ) -> None:
        body = stack.kwok_deployment_body(name, replicas, annotations)
        self.apps.create_namespaced_deployment(self.name, body)
        self.wait(lambda: len(self.running(name)) == replicas, f"{replicas} running pods of {name}")

    def pods(self, app: str = "srv") -> list[Any]:
        return list(self.core.list_namespaced_pod(self.name, label_selector=f"app={app}").items)

    def running(self, app: str = "srv") -> list[Any]:
        return [
            p
            for p in self.pods(app)
            if p.status.phase == "Running"
            and p.metadata.deletion_timestamp is None
            and p.spec.node_name == NODE
        ]

    def uids(self, app: str = "srv") -> set[str]:
        return {p.metadata.uid for p in self.pods(app) if p.metadata.deletion_timestamp is None}

    def replicas(self, name: str = "srv") -> int:
        return int(self.apps.read_namespaced_deployment(name, self.name).spec.replicas)

    def template_annotations(self, name: str = "srv") -> dict[str, str]:
        dep = self.apps.read_namespaced_deployment(name, self.name)
        return dict(dep.spec.template.metadata.annotations or {})

    @staticmethod
    def wait(done: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.25)


def _namespace(api: client.ApiClient, opted_in: bool) -> Iterator[Space]:
    name = f"e2e-fault-{uuid.uuid4().hex[:8]}"
    labels = {FAULT_OPT_IN_LABEL: "enabled"} if opted_in else {}
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    try:
        yield Space(api, name)
    finally:
        core.delete_namespace(name, grace_period_seconds=0)


@pytest.fixture
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        yield api_client


@pytest.fixture
def ns(api: client.ApiClient) -> Iterator[Space]:
    """A namespace labelled for faults."""
    yield from _namespace(api, opted_in=True)


@pytest.fixture
def plain_ns(api: client.ApiClient) -> Iterator[Space]:
    """A namespace that did not opt in."""
    yield from _namespace(api, opted_in=False)


@pytest.fixture
def zone(api: client.ApiClient) -> Iterator[str]:
    """A zone of this test's own on kwok-cpu-0; the node's labels and cordon are put back after."""
    core = client.CoreV1Api(api)
    node = core.read_node(NODE)
    before = (node.metadata.labels or {}).get(ZONE_LABEL)
    name = f"faults-{uuid.uuid4().hex[:6]}"
    core.patch_node(NODE, {"metadata": {"labels": {ZONE_LABEL: name}}})
    try:
        yield name
    finally:
        core.patch_node(
            NODE, {"metadata": {"labels": {ZONE_LABEL: before}}, "spec": {"unschedulable": False}}
        )


def unschedulable(api: client.ApiClient) -> bool:
    return bool(client.CoreV1Api(api).read_node(NODE).spec.unschedulable)


async def test_a_namespace_without_the_label_is_refused_and_nothing_changes(
    api: client.ApiClient, plain_ns: Space, zone: str
) -> None:
    plain_ns.deployment(replicas=2)
    before = plain_ns.uids()
    faults = [
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}, mode="all")),
        FaultSpec(kind="zoneOutage", zone=zone),
        FaultSpec(kind="scaleDown", workload="srv", replicas=0),
    ]
    for fault in faults:
        with pytest.raises(FaultRefused) as info:
            await plan_fault(fault, plain_ns.name, POLICY, api)
        assert info.value.reason == "NamespaceNotOptedIn"
    assert plain_ns.uids() == before and plain_ns.replicas() == 2 and not unschedulable(api)


async def test_pod_kill_evicts_and_the_controller_replaces(api: client.ApiClient, ns: Space) -> None:
    ns.deployment(replicas=2)
    planned = await plan_fault(
        FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"})), ns.name, POLICY, api
    )
    victim = planned.undo["pods"][0]["uid"]
    assert victim in ns.uids()
    message = await inject_fault(planned, api)
    assert message.startswith("evicted 1 pod(s)")
    ns.wait(lambda: victim not in ns.uids() and len(ns.running()) == 2, "the pod replaced")
    assert "replaced by their controller" in await revert_fault(planned.kind, planned.undo, api)


async def test_zone_outage_cordons_evicts_and_revert_uncordons(
    api: client.ApiClient, ns: Space, plain_ns: Space, zone: str
) -> None:
    ns.deployment(replicas=2)
    plain_ns.deployment(name="bystander", replicas=1)  # another namespace's pod on the same node
    bystander = plain_ns.uids("bystander")
    planned = await plan_fault(FaultSpec(kind="zoneOutage", zone=zone), ns.name, POLICY, api)
    assert planned.undo["cordon"] == [NODE] and len(planned.undo["pods"]) == 2
    assert not unschedulable(api)  # planning touched nothing
    await inject_fault(planned, api)
    assert unschedulable(api)
    ns.wait(lambda: ns.running() == [], "the zone's pods evicted")
    pending = ns.pods()
    assert all(p.spec.node_name is None for p in pending if p.metadata.deletion_timestamp is None)
    assert plain_ns.uids("bystander") == bystander
    message = await revert_fault(planned.kind, planned.undo, api)
    assert message.startswith(f"uncordoned {NODE}")
    assert not unschedulable(api)
    ns.wait(lambda: len(ns.running()) == 2, "the pods back on the node")
    assert (await revert_fault(planned.kind, planned.undo, api)).startswith("no node left cordoned")


async def test_node_drain_by_delete_and_a_node_cordoned_before_stays_cordoned(
    api: client.ApiClient, ns: Space, zone: str
) -> None:
    ns.deployment(replicas=1)
    planned = await plan_fault(FaultSpec(kind="nodeDrain", node=NODE, evict=False), ns.name, POLICY, api)
    await inject_fault(planned, api)
    ns.wait(lambda: ns.running() == [], "the node drained")
    await revert_fault(planned.kind, planned.undo, api)
    assert not unschedulable(api)
    client.CoreV1Api(api).patch_node(NODE, {"spec": {"unschedulable": True}})
    again = await plan_fault(FaultSpec(kind="nodeDrain", node=NODE), ns.name, POLICY, api)
    assert again.undo["cordon"] == []
    await revert_fault(again.kind, again.undo, api)
    assert unschedulable(api)  # put back by the zone fixture


async def test_scale_down_and_back(api: client.ApiClient, ns: Space) -> None:
    ns.deployment(replicas=3)
    planned = await plan_fault(FaultSpec(kind="scaleDown", workload="srv", replicas=1), ns.name, POLICY, api)
    await inject_fault(planned, api)
    assert ns.replicas() == 1
    ns.wait(lambda: len(ns.running()) == 1, "scaled down to one pod")
    assert "to 3 replicas (was 1)" in await revert_fault(planned.kind, planned.undo, api)
    assert ns.replicas() == 3
    ns.wait(lambda: len(ns.running()) == 3, "scaled back to three pods")


async def test_rollout_restart_and_revert(api: client.ApiClient, ns: Space) -> None:
    ns.deployment(replicas=1, annotations={"keep": "me"})
    planned = await plan_fault(FaultSpec(kind="rolloutRestart", workload="srv"), ns.name, POLICY, api)
    before = ns.uids()
    await inject_fault(planned, api)
    assert RESTARTED_AT in ns.template_annotations()
    ns.wait(lambda: len(ns.running()) == 1 and ns.uids().isdisjoint(before), "the restart rolled out")
    assert "another rollout" in await revert_fault(planned.kind, planned.undo, api)
    assert ns.template_annotations() == {"keep": "me"}


async def test_config_hot_update_and_revert(api: client.ApiClient, ns: Space) -> None:
    ns.core.create_namespaced_config_map(
        ns.name, {"metadata": {"name": "srv-config"}, "data": {"mode": "v1", "other": "x"}}
    )
    ns.deployment(replicas=1, annotations={"checksum/config": "old"})
    fault = FaultSpec(
        kind="configHotUpdate", config_map="srv-config", data={"mode": "v2", "new": "1"}, workload="srv"
    )
    planned = await plan_fault(fault, ns.name, POLICY, api)
    await inject_fault(planned, api)
    data = ns.core.read_namespaced_config_map("srv-config", ns.name).data
    assert data == {"mode": "v2", "new": "1", "other": "x"}
    expected = config_hash([ConfigContent("ConfigMap", "srv-config", data, {})])
    assert ns.template_annotations() == {"checksum/config": expected}
    await revert_fault(planned.kind, planned.undo, api)
    assert ns.core.read_namespaced_config_map("srv-config", ns.name).data == {"mode": "v1", "other": "x"}
    assert ns.template_annotations() == {"checksum/config": "old"}


def _budget(ns: Space) -> None:
    policy = client.PolicyV1Api(ns.api)
    body = {
        "metadata": {"name": "srv"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "srv"}}},
    }
    policy.create_namespaced_pod_disruption_budget(ns.name, body)

    def observed() -> bool:
        pdb = policy.read_namespaced_pod_disruption_budget("srv", ns.name)
        return pdb.status is not None and (pdb.status.observed_generation or 0) >= pdb.metadata.generation

    ns.wait(observed, "the disruption controller to observe the budget")


async def test_a_budget_of_max_unavailable_zero_refuses_the_eviction(
    api: client.ApiClient, ns: Space
) -> None:
    ns.deployment(replicas=1)
    fault = FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "srv"}))
    early = await plan_fault(fault, ns.name, POLICY, api)  # planned before the budget exists
    before = ns.uids()
    _budget(ns)
    with pytest.raises(FaultRefused) as at_plan:
        await plan_fault(fault, ns.name, POLICY, api)
    assert at_plan.value.reason == "EvictionRefused" and "allows 0 disruption(s)" in str(at_plan.value)
    with pytest.raises(FaultRefused) as at_inject:  # the API server's own 429
        await inject_fault(early, api)
    assert at_inject.value.reason == "EvictionRefused" and "not forced" in str(at_inject.value)
    time.sleep(1)
    assert ns.uids() == before and len(ns.running()) == 1


async def test_objects_that_are_not_there(api: client.ApiClient, ns: Space) -> None:
    missing = [
        (FaultSpec(kind="scaleDown", workload="absent"), "WorkloadNotFound"),
        (
            FaultSpec(kind="configHotUpdate", config_map="absent", data={"k": "v"}, workload="srv"),
            "ConfigMapNotFound",
        ),
        (FaultSpec(kind="nodeDrain", node="no-such-node"), "NothingSelected"),
        (FaultSpec(kind="podKill", pods=PodSelection(match_labels={"app": "absent"})), "NothingSelected"),
    ]
    for fault, reason in missing:
        with pytest.raises(FaultRefused) as info:
            await plan_fault(fault, ns.name, POLICY, api)
        assert info.value.reason == reason, (fault.kind, info.value)
