"""Which pods a fault takes: pure functions over the pods the API listed, so the choice is
deterministic (sorted by name) and testable without a cluster."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TERMINAL_PHASES = ("Succeeded", "Failed")


def how_many(mode: str, value: int, available: int) -> int:
    """Pods taken out of ``available``: one; ``count`` (at most what there is); ``percent``
    rounded up, so any percent of a non-empty set takes at least one; all."""
    if available <= 0:
        return 0
    if mode == "one":
        return 1
    if mode == "count":
        return min(value, available)
    if mode == "percent":
        return min(available, math.ceil(available * value / 100))
    if mode == "all":
        return available
    raise ValueError(f"unknown selection mode {mode!r}")


def choose(names: Iterable[str], mode: str, value: int) -> list[str]:
    """The first pods by name: the same pods for the same cluster state, every time."""
    ordered = sorted(names)
    return ordered[: how_many(mode, value, len(ordered))]


def label_selector(match_labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))


def is_deleting(pod: Any) -> bool:
    return pod.metadata.deletion_timestamp is not None


def is_running(pod: Any) -> bool:
    return (pod.status.phase if pod.status else None) == "Running" and not is_deleting(pod)


def controller_kind(pod: Any) -> str | None:
    """The kind of the pod's controller (ReplicaSet, StatefulSet, ...), None for a bare pod."""
    for ref in pod.metadata.owner_references or []:
        if ref.controller:
            return str(ref.kind)
    return None


def drained(pod: Any) -> bool:
    """Whether a drain acts on this pod, as ``kubectl drain`` decides: not mirror pods (the API
    cannot evict them), not DaemonSet pods (they would come back on the same node), not pods
    that already ended or are being deleted."""
    annotations = pod.metadata.annotations or {}
    phase = pod.status.phase if pod.status else None
    return not (
        MIRROR_ANNOTATION in annotations
        or controller_kind(pod) == "DaemonSet"
        or phase in TERMINAL_PHASES
        or is_deleting(pod)
    )


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (as the client returns it) against a pod's labels. A null
    selector matches nothing and an empty one everything, as for a policy/v1 PDB."""
    if selector is None:
        return False
    for key, value in (selector.match_labels or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.match_expressions or []:
        values = set(expr.values or [])
        present = expr.key in labels
        ok = {
            "In": present and labels.get(expr.key) in values,
            "NotIn": not present or labels.get(expr.key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(expr.operator)
        if not ok:
            return False
    return True
