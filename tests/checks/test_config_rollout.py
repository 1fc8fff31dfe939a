"""Rollout comparison over API objects as dicts: template, current ReplicaSet, older ones."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Any

from mcp_checks.config import (
    ConfigConsistencySpec,
    ConfigContent,
    Observed,
    evaluate,
    label_selector,
)
from mcp_checks.config.hashing import config_hash, short
from mcp_checks.config.rollout import assess_rollout, deployment_revisions, statefulset_revisions
from mcp_checks.verdict import Verdict

ANN = "checksum/config"
SECRET_VALUE = "s3cr3t-hunter2-value"
CONTENTS = [
    ConfigContent("ConfigMap", "app", {"mode": "fast"}, {}),
    ConfigContent("Secret", "creds", {"token": base64.b64encode(SECRET_VALUE.encode()).decode()}, {}),
]
NEW = config_hash(CONTENTS)
OLD = "0" * 64


def deployment(template_hash: str | None = NEW, replicas: int = 2, revision: str = "2") -> dict[str, Any]:
    annotations = {ANN: template_hash} if template_hash else {}
    return {
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "uid": "d-1",
            "generation": 3,
            "annotations": {"deployment.kubernetes.io/revision": revision},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"annotations": annotations}},
        },
        "status": {"observedGeneration": 3},
    }


def rs(name: str, revision: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {"deployment.kubernetes.io/revision": revision},
            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "d-1"}],
        }
    }


def pod(name: str, owner: str, config: str, ready: bool = True, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {ANN: config},
            "ownerReferences": [{"kind": "ReplicaSet", "name": owner}],
            **meta,
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


SETS = [rs("web-old", "1"), rs("web-new", "2")]
SPEC = ConfigConsistencySpec("ns", "web", config_maps=("app",), secrets=("creds",))


def run(dep: dict[str, Any], pods: list[dict[str, Any]], sets: list[dict[str, Any]] = SETS) -> Any:
    return evaluate(SPEC, Observed(CONTENTS, dep, sets, pods), "test")


def test_rolled_out_config_passes() -> None:
    out = run(deployment(), [pod("web-new-a", "web-new", NEW), pod("web-new-b", "web-new", NEW)])
    assert out.outcome == Verdict.PASS, out
    assert out.reason == "ConfigRolledOut"
    assert out.observed["configHash"] == short(NEW) and out.observed["readyPods"] == "2"


def test_ready_pods_of_an_older_replicaset_fail_and_are_named() -> None:
    pods = [
        pod("web-new-a", "web-new", NEW),
        pod("web-old-x", "web-old", OLD),
        pod("web-old-y", "web-old", OLD, ready=False),  # not serving: not a finding
        pod("web-old-z", "web-old", OLD, deletionTimestamp="2026-01-01T00:00:00Z"),  # terminating
    ]
    out = run(deployment(), pods)
    assert out.outcome == Verdict.FAIL
    assert out.reason == "OldRevisionPodsReady"
    assert "web-old-x" in out.message and "web-old-y" not in out.message
    assert [f.subject for f in out.findings] == ["web-old-x"]
    assert out.findings[0].observed == short(OLD) and out.findings[0].threshold == short(NEW)


def test_template_not_updated_after_a_config_change_fails() -> None:
    out = run(deployment(template_hash=OLD), [pod("web-old-x", "web-new", OLD)])
    assert (out.outcome, out.reason) == (Verdict.FAIL, "TemplateChecksumMismatch")


def test_missing_annotation_is_an_error_not_a_pass() -> None:
    out = run(deployment(template_hash=None), [pod("a", "web-new", NEW)])
    assert (out.outcome, out.reason) == (Verdict.ERROR, "ChecksumAnnotationMissing")


def test_pod_of_current_revision_with_another_hash_fails() -> None:
    out = run(deployment(), [pod("web-new-a", "web-new", NEW), pod("web-new-b", "web-new", OLD)])
    assert (out.outcome, out.reason) == (Verdict.FAIL, "PodChecksumMismatch")
    assert out.findings[0].subject == "web-new-b"


def test_no_pod_is_inconclusive() -> None:
    out = run(deployment(), [])
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoReadyPods")
    out = run(deployment(replicas=0), [])
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoReplicas")


def test_fewer_ready_than_desired_warns() -> None:
    out = run(deployment(replicas=3), [pod("web-new-a", "web-new", NEW)])
    assert (out.outcome, out.reason) == (Verdict.WARN, "RolloutIncomplete")


def test_rollout_not_yet_observed_or_unknown_replicaset_is_inconclusive() -> None:
    dep = deployment()
    dep["status"]["observedGeneration"] = 2
    assert run(dep, [pod("a", "web-new", NEW)]).reason == "RolloutNotObserved"
    unknown = run(deployment(revision="7"), [pod("a", "web-new", NEW)])
    assert (unknown.outcome, unknown.reason) == (Verdict.INCONCLUSIVE, "CurrentReplicaSetNotFound")


def test_replicasets_of_another_owner_are_ignored() -> None:
    foreign = rs("other", "1")
    foreign["metadata"]["ownerReferences"][0]["uid"] = "d-2"
    revs = deployment_revisions(deployment(), [*SETS, foreign], [pod("o", "other", OLD)])
    assert not isinstance(revs, str)
    assert revs.current == "web-new" and revs.older_pods == []


def test_statefulset_pods_split_by_controller_revision_hash() -> None:
    sts = {
        "kind": "StatefulSet",
        "metadata": {"name": "db", "generation": 1},
        "spec": {"replicas": 2, "template": {"metadata": {"annotations": {ANN: NEW}}}},
        "status": {"observedGeneration": 1, "updateRevision": "db-2"},
    }

    def sts_pod(name: str, rev: str, config: str) -> dict[str, Any]:
        p = pod(name, "", config)
        p["metadata"]["labels"] = {"controller-revision-hash": rev}
        return p

    revs = statefulset_revisions(sts, [sts_pod("db-0", "db-2", NEW), sts_pod("db-1", "db-1", OLD)])
    out = assess_rollout(sts, revs, NEW, ANN, "test")
    assert (out.outcome, out.reason) == (Verdict.FAIL, "OldRevisionPodsReady")
    assert [f.subject for f in out.findings] == ["db-1"]
    del sts["status"]["updateRevision"]
    assert statefulset_revisions(sts, []) == "UpdateRevisionUnknown"


def test_secret_value_never_appears_in_the_outcome() -> None:
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    for pods in ([pod("a", "web-new", NEW), pod("b", "web-new", NEW)], [pod("x", "web-old", OLD)]):
        out = run(deployment(), pods)
        text = json.dumps(asdict(out)) + repr(out) + str(out)
        assert SECRET_VALUE not in text and encoded not in text
        assert NEW not in text  # only the prefix travels
        assert short(NEW) in text


def test_label_selector_string() -> None:
    selector = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["x", "y"]},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "gpu", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    assert label_selector(selector) == "a=1,b=2,tier in (x,y),env notin (dev),gpu,!canary"
