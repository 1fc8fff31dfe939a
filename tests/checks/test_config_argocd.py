"""Argo CD Application status as Argo CD writes it: sync, health, operation, waves."""

from __future__ import annotations

from typing import Any

from mcp_checks.config import ArgoApplicationRef, expected_revision, resource_wave, waves_up_to
from mcp_checks.config.argocd import assess_application
from mcp_checks.verdict import Verdict

SHA = "4f2c9d0b6a1e8f7c3d5b2a90e1f4c6d8b7a3e5f1"
OLDSHA = "1" * 40


def res(
    kind: str,
    name: str,
    wave: int | None = None,
    sync: str = "Synced",
    health: str | None = "Healthy",
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "group": "apps",
        "version": "v1",
        "kind": kind,
        "namespace": "prod",
        "name": name,
        "status": sync,
        **extra,
    }
    if health is not None:
        out["health"] = {"status": health}
    if wave:  # Argo CD omits syncWave when it is 0
        out["syncWave"] = wave
    return out


def app(
    sync: str = "Synced",
    health: str = "Healthy",
    phase: str = "Succeeded",
    revision: str = SHA,
    target: str = "main",
    resources: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {
            "source": {"repoURL": "https://git.example/web.git", "targetRevision": target, "path": "k8s"}
        },
        "status": {
            "sync": {"status": sync, "revision": revision},
            "health": {"status": health},
            "operationState": {"phase": phase, "message": "", "syncResult": {"revision": revision}},
            "resources": resources
            if resources is not None
            else [res("ConfigMap", "web-config", -1, health=None), res("Deployment", "web")],
        },
    }


REF = ArgoApplicationRef("web", expected_revision=SHA)


def test_synced_healthy_succeeded_at_expected_revision_passes() -> None:
    out = assess_application(app(), REF, "test")
    assert (out.outcome, out.reason) == (Verdict.PASS, "ApplicationSynced"), out.message


def test_each_bad_status_fails_with_its_reason() -> None:
    cases = {
        "ApplicationOutOfSync": app(sync="OutOfSync"),
        "ApplicationNotHealthy": app(health="Degraded"),
        "SyncOperationFailed": app(phase="Failed"),
        "RevisionMismatch": app(revision=OLDSHA),
    }
    for reason, obj in cases.items():
        out = assess_application(obj, REF, "test")
        assert (out.outcome, out.reason) == (Verdict.FAIL, reason), (reason, out.message)


def test_expected_revision_from_spec_then_full_sha_target_then_last_sync() -> None:
    assert expected_revision(app(), REF) == (SHA, "spec")
    bare = ArgoApplicationRef("web")
    assert expected_revision(app(target=SHA.upper()), bare) == (SHA.upper(), "spec.source.targetRevision")
    assert expected_revision(app(target="main"), bare) == (SHA, "status.operationState.syncResult.revision")
    pinned = assess_application(app(target=OLDSHA), bare, "test")
    assert (pinned.outcome, pinned.reason) == (Verdict.FAIL, "RevisionMismatch")


def test_missing_status_is_inconclusive() -> None:
    obj = app()
    del obj["status"]["operationState"]
    out = assess_application(obj, REF, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ApplicationStatusMissing")


def test_wave_reading() -> None:
    assert resource_wave({"syncWave": 3}) == 3
    assert resource_wave({"syncWave": "-2"}) == -2
    assert resource_wave({}) == 0
    assert resource_wave({"annotations": {"argocd.argoproj.io/sync-wave": "5"}}) == 5


def test_running_wave_at_or_before_the_gate_is_inconclusive_with_the_wave_number() -> None:
    resources = [
        res("ConfigMap", "cfg", -1, health=None),
        res("Deployment", "web", 2, sync="Synced", health="Progressing"),
        res("Deployment", "later", 8, sync="OutOfSync", health="Missing"),
    ]
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5)
    running = app(sync="OutOfSync", health="Progressing", phase="Running", resources=resources)
    out = assess_application(running, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning")
    assert "wave 2" in out.message and "Deployment/web" in out.message
    assert [f.subject for f in out.findings] == ["Deployment/web"]
    assert waves_up_to(running, ref).first_wave == 2


def test_sync_running_only_for_later_waves_and_the_gate_passes() -> None:
    resources = [
        res("Deployment", "web", 2),
        res("MCPReadiness", "gate", 5, health="Progressing"),  # the gate itself, still evaluating
        res("Deployment", "later", 8, sync="OutOfSync", health="Missing"),
        res("Job", "presync", -5, sync="OutOfSync", health="Progressing", hook=True),  # hooks are skipped
    ]
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5, gate_resource="MCPReadiness/gate")
    running = app(sync="OutOfSync", health="Progressing", phase="Running", resources=resources)
    out = assess_application(running, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.PASS, "ApplicationSynced"), out.message
    # the same resources without a gate wave: the whole app counts, and it is still running
    whole = assess_application(running, ArgoApplicationRef("web", expected_revision=SHA), "test")
    assert (whole.outcome, whole.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning")
    assert "wave 5" in whole.message


def test_unhealthy_resource_after_a_finished_sync_fails() -> None:
    resources = [res("Deployment", "web", 1, health="Degraded")]
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=3)
    out = assess_application(app(resources=resources), ref, "test")
    assert (out.outcome, out.reason) == (Verdict.FAIL, "SyncWaveIncomplete")
    assert out.findings[0].reason == "ResourceNotHealthy"
    assert out.findings[0].observed == "wave 1: Synced/Degraded"
