"""Which pods a fault takes: the modes, a choice that does not depend on listing order, label
selectors as a PodDisruptionBudget reads them, and the pods a drain leaves alone."""

from __future__ import annotations

import random

import pytest
from kubernetes import client

from mcp_operator.readiness.faults.selection import choose, drained, how_many, selector_matches


@pytest.mark.parametrize(
    ("mode", "value", "available", "taken"),
    [
        ("one", 1, 5, 1),
        ("one", 7, 5, 1),
        ("count", 2, 5, 2),
        ("count", 9, 5, 5),
        ("percent", 50, 5, 3),  # rounded up
        ("percent", 1, 5, 1),  # any percent of a non-empty set takes one
        ("percent", 100, 5, 5),
        ("all", 1, 5, 5),
        ("all", 1, 0, 0),
        ("one", 1, 0, 0),
    ],
)
def test_how_many(mode: str, value: int, available: int, taken: int) -> None:
    assert how_many(mode, value, available) == taken


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown selection mode"):
        how_many("most", 1, 3)


def test_choice_is_by_name_whatever_the_listing_order() -> None:
    names = [f"srv-{c}" for c in "dbeac"]
    for _ in range(20):
        random.shuffle(names)
        assert choose(names, "count", 2) == ["srv-a", "srv-b"]
        assert choose(names, "percent", 40) == ["srv-a", "srv-b"]
        assert choose(names, "one", 1) == ["srv-a"]


def _sel(**kw: object) -> client.V1LabelSelector:
    return client.V1LabelSelector.from_dict(kw)


def test_selector_matches_labels_and_expressions() -> None:
    labels = {"app": "srv", "tier": "gpu"}
    assert selector_matches(_sel(matchLabels={"app": "srv"}), labels)
    assert not selector_matches(_sel(matchLabels={"app": "web"}), labels)
    expr = {"key": "tier", "operator": "In", "values": ["gpu", "cpu"]}
    assert selector_matches(_sel(matchExpressions=[expr]), labels)
    assert not selector_matches(_sel(matchExpressions=[{**expr, "operator": "NotIn"}]), labels)
    assert selector_matches(_sel(matchExpressions=[{"key": "zone", "operator": "DoesNotExist"}]), labels)
    assert not selector_matches(_sel(matchExpressions=[{"key": "zone", "operator": "Exists"}]), labels)


def test_empty_selector_matches_every_pod_and_a_null_one_none() -> None:
    assert selector_matches(_sel(), {"app": "srv"})
    assert not selector_matches(None, {"app": "srv"})


def _pod(**meta: object) -> client.V1Pod:
    phase = meta.pop("phase", "Running")
    return client.V1Pod.from_dict(
        {"metadata": {"name": "p", **meta}, "spec": {"containers": []}, "status": {"phase": phase}}
    )


def test_drain_leaves_mirror_daemonset_finished_and_deleting_pods_alone() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": True}
    ds = {**rs, "kind": "DaemonSet"}
    assert drained(_pod(ownerReferences=[rs]))
    assert drained(_pod(phase="Pending"))
    assert not drained(_pod(ownerReferences=[ds]))
    assert not drained(_pod(annotations={"kubernetes.io/config.mirror": "x"}))
    assert not drained(_pod(phase="Succeeded"))
    assert not drained(_pod(deletionTimestamp="2026-01-01T00:00:00Z"))
