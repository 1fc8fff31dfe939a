"""A small cluster in the in-memory API (``fakekube``) for the fault tests: an opted-in
namespace, nodes in zones, pods of a ReplicaSet on them, a Deployment and a ConfigMap.
(Helpers live here, not in conftest.py, so the tests can import them.)"""

from __future__ import annotations

from typing import Any

from tests.operator.fakekube import FakeKube, pod_object

from mcp_operator.api.drill import FAULT_OPT_IN_LABEL

NS = "ml"
OTHER_NS = "other"
ZONE_LABEL = "topology.kubernetes.io/zone"
API: Any = object()  # stands for the caller's ApiClient; base.apis answers with the fake


class Cluster:
    """Arrange objects in the fake and read them back."""

    def __init__(self, fake: FakeKube) -> None:
        self.fake = fake

    def namespace(self, name: str, opted_in: bool = True) -> None:
        labels = {FAULT_OPT_IN_LABEL: "enabled"} if opted_in else {}
        self.fake.put("Namespace", {"metadata": {"name": name, "labels": labels}})

    def node(self, name: str, zone: str | None = None, unschedulable: bool = False) -> None:
        labels = {ZONE_LABEL: zone} if zone else {}
        spec = {"unschedulable": True} if unschedulable else {}
        self.fake.put(
            "Node",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec},
        )

    def pod(
        self,
        name: str,
        namespace: str = NS,
        node: str = "node-a1",
        labels: dict[str, str] | None = None,
        owner: str | None = "ReplicaSet",
        phase: str = "Running",
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        obj = pod_object(name, namespace, labels or {"app": "srv"}, phase=phase)
        obj["spec"]["nodeName"] = node
        if owner:
            ref = {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": "srv-rs",
                "uid": "rs-uid",
                "controller": True,
            }
            obj["metadata"]["ownerReferences"] = [ref]
        if annotations:
            obj["metadata"]["annotations"] = annotations
        return self.fake.put("Pod", obj)

    def deployment(
        self, name: str = "srv", replicas: int = 3, annotations: dict[str, str] | None = None
    ) -> None:
        template: dict[str, Any] = {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/main:1"}]},
        }
        if annotations:
            template["metadata"]["annotations"] = dict(annotations)
        self.fake.put(
            "Deployment",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": template,
                },
            },
        )

    def config_map(self, name: str = "srv-config", data: dict[str, str] | None = None) -> None:
        self.fake.put(
            "ConfigMap",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": NS},
                "data": data or {},
            },
        )

    def pdb(self, name: str, match_labels: dict[str, str], allowed: int, current: bool = True) -> None:
        self.fake.put(
            "PodDisruptionBudget",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": NS, "generation": 2},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": match_labels}},
                "status": {
                    "observedGeneration": 2 if current else 1,
                    "disruptionsAllowed": allowed,
                    "currentHealthy": 3,
                    "desiredHealthy": 3,
                    "expectedPods": 3,
                },
            },
        )

    def unschedulable(self, node: str) -> bool:
        obj = self.fake.get("Node", "", node)
        assert obj is not None
        return bool(obj["spec"].get("unschedulable"))

    def pods(self, namespace: str = NS) -> list[str]:
        return self.fake.names("Pod", namespace)

    def template_annotations(self, name: str = "srv") -> dict[str, str]:
        obj = self.fake.get("Deployment", NS, name)
        assert obj is not None
        return dict(obj["spec"]["template"]["metadata"].get("annotations") or {})

    def writes(self) -> list[tuple[str, str, str | None]]:
        """Every call that could change the cluster, as (verb, kind, name) (an access review
        is a question, not a change)."""
        return [
            (c.verb, c.kind, c.name)
            for c in self.fake.calls
            if c.verb in ("create", "patch", "replace", "delete") and c.kind != "SelfSubjectAccessReview"
        ]
