"""Is the config hash on the workload's pod template, on every ready pod of its current
revision, and on no pod of an older one? Pure functions over API objects as dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..verdict import Finding, Verdict
from .assessment import Assessment, names
from .hashing import normalise, short

REVISION = "deployment.kubernetes.io/revision"
STS_REVISION_LABEL = "controller-revision-hash"

Obj = Mapping[str, Any]


def _get(obj: Obj, *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def is_serving(pod: Obj) -> bool:
    """Ready and not terminating: what an EndpointSlice would route traffic to."""
    if _get(pod, "metadata", "deletionTimestamp"):
        return False
    conditions = _get(pod, "status", "conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass(frozen=True)
class Revisions:
    """Pods split by the workload's revision: current and older (by owner ReplicaSet or,
    for a StatefulSet, by ``controller-revision-hash``)."""

    current: str
    current_pods: list[Obj]
    older_pods: list[Obj]


def deployment_revisions(
    deployment: Obj, replica_sets: Sequence[Obj], pods: Sequence[Obj]
) -> Revisions | str:
    """The current ReplicaSet is the owned one whose revision annotation equals the
    Deployment's; returns a CamelCase reason when it cannot be told."""
    uid = _get(deployment, "metadata", "uid")
    owned = [
        rs
        for rs in replica_sets
        if any(o.get("uid") == uid for o in _get(rs, "metadata", "ownerReferences") or [])
    ]
    revision = (_get(deployment, "metadata", "annotations") or {}).get(REVISION)
    current = [rs for rs in owned if (_get(rs, "metadata", "annotations") or {}).get(REVISION) == revision]
    if revision is None or len(current) != 1:
        return "CurrentReplicaSetNotFound"
    current_name = current[0]["metadata"]["name"]
    older = {rs["metadata"]["name"] for rs in owned} - {current_name}

    def owner(pod: Obj) -> str | None:
        refs = _get(pod, "metadata", "ownerReferences") or []
        return next((r.get("name") for r in refs if r.get("kind") == "ReplicaSet"), None)

    return Revisions(
        current_name,
        [p for p in pods if owner(p) == current_name],
        [p for p in pods if owner(p) in older],
    )


def statefulset_revisions(statefulset: Obj, pods: Sequence[Obj]) -> Revisions | str:
    current = _get(statefulset, "status", "updateRevision")
    if not current:
        return "UpdateRevisionUnknown"

    def rev(pod: Obj) -> str | None:
        labels: Mapping[str, str] = _get(pod, "metadata", "labels") or {}
        return labels.get(STS_REVISION_LABEL)

    return Revisions(
        current,
        [p for p in pods if rev(p) == current],
        [p for p in pods if rev(p) is not None and rev(p) != current],
    )


def template_hash(workload: Obj, annotation: str) -> str | None:
    value = (_get(workload, "spec", "template", "metadata", "annotations") or {}).get(annotation)
    return normalise(value) if isinstance(value, str) else None


def pod_hash(pod: Obj, annotation: str) -> str | None:
    value = (_get(pod, "metadata", "annotations") or {}).get(annotation)
    return normalise(value) if isinstance(value, str) else None


def assess_rollout(
    workload: Obj,
    revisions: Revisions | str,
    expected: str,
    annotation: str,
    source: str,
) -> Assessment:
    """Template, then revision bookkeeping, then every serving pod; old pods are named."""
    kind = workload.get("kind", "Workload")
    name = _get(workload, "metadata", "name")
    observed = {"configHash": short(expected)}
    found = template_hash(workload, annotation)
    if found is None:
        return Assessment(
            Verdict.ERROR,
            "ChecksumAnnotationMissing",
            f"{kind} {name} has no {annotation} annotation on its pod template, so a config change "
            "cannot be traced to a rollout",
            observed=observed,
        )
    observed["templateHash"] = short(found)
    if found != normalise(expected):
        return Assessment(
            Verdict.FAIL,
            "TemplateChecksumMismatch",
            f"{kind} {name} pod template carries {annotation}={short(found)}, "
            f"the config hashes to {short(expected)}: the change was not rolled out",
            observed=observed,
        )
    generation = _get(workload, "metadata", "generation") or 0
    if (_get(workload, "status", "observedGeneration") or 0) < generation:
        return Assessment(
            Verdict.INCONCLUSIVE,
            "RolloutNotObserved",
            f"the {kind} controller has not yet observed generation {generation} of {name}",
            observed=observed,
        )
    if isinstance(revisions, str):
        return Assessment(
            Verdict.INCONCLUSIVE,
            revisions,
            f"the current revision of {kind} {name} cannot be told",
            observed=observed,
        )
    observed["currentRevision"] = revisions.current
    serving = [p for p in revisions.current_pods if is_serving(p)]
    stale = [p for p in revisions.older_pods if is_serving(p)]
    findings: list[Finding] = []
    for pod in serving:
        seen = pod_hash(pod, annotation)
        if seen != normalise(expected):
            findings.append(
                Finding(
                    pod["metadata"]["name"],
                    Verdict.FAIL,
                    "PodChecksumMismatch",
                    short(seen) if seen else "absent",
                    short(expected),
                    source,
                )
            )
    for pod in stale:
        seen = pod_hash(pod, annotation)
        findings.append(
            Finding(
                pod["metadata"]["name"],
                Verdict.FAIL,
                "OldRevisionPodReady",
                short(seen) if seen else "absent",
                short(expected),
                source,
            )
        )
    desired = _get(workload, "spec", "replicas")
    desired = 1 if desired is None else int(desired)
    observed.update(
        {"readyPods": str(len(serving)), "desiredReplicas": str(desired), "oldReadyPods": str(len(stale))}
    )
    if stale:
        return Assessment(
            Verdict.FAIL,
            "OldRevisionPodsReady",
            f"{len(stale)} pod(s) of an older revision still serve: "
            f"{names([p['metadata']['name'] for p in stale])}",
            findings,
            observed,
        )
    if any(f.reason == "PodChecksumMismatch" for f in findings):
        bad = [f.subject for f in findings if f.reason == "PodChecksumMismatch"]
        return Assessment(
            Verdict.FAIL,
            "PodChecksumMismatch",
            f"pod(s) of the current revision run another config hash: {names(bad)}",
            findings,
            observed,
        )
    if not serving:
        reason = "NoReplicas" if desired == 0 else "NoReadyPods"
        return Assessment(
            Verdict.INCONCLUSIVE,
            reason,
            f"no ready pod of {kind} {name} revision {revisions.current} to compare",
            findings,
            observed,
        )
    if len(serving) < desired:
        return Assessment(
            Verdict.WARN,
            "RolloutIncomplete",
            f"{len(serving)}/{desired} pods of {kind} {name} are ready, all on config {short(expected)}",
            findings,
            observed,
        )
    return Assessment(
        Verdict.PASS,
        "ConfigRolledOut",
        f"{kind} {name}: template and {len(serving)} ready pod(s) carry config {short(expected)}",
        findings,
        observed,
    )
