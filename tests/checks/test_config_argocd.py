"""Argo CD Application status as Argo CD writes it: sync, health, operation, waves."""

from __future__ import annotations

from typing import Any

from mcp_checks.config import ArgoApplicationRef, expected_revision, resource_wave, waves_up_to
from mcp_checks.config.argocd import assess_application, resource_id
from mcp_checks.verdict import Finding, Verdict

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


def in_tree(resources: list[dict[str, Any]], seen: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    """An Application as Argo CD 3 writes it by default: no health per resource (it stays in the
    resource tree), and this sync's result per resource with its hookPhase."""
    obj = app(resources=[{k: v for k, v in r.items() if k != "health"} for r in resources], **kw)
    obj["status"]["resourceHealthSource"] = "appTree"
    obj["status"]["operationState"]["syncResult"]["resources"] = seen
    return obj


def result(kind: str, name: str, phase: str = "Succeeded", **extra: Any) -> dict[str, Any]:
    return {"group": "apps", "kind": kind, "namespace": "prod", "name": name, "status": "Synced",
            "hookPhase": phase, **extra}  # fmt: skip


def test_argo_cd_3_resource_health_is_what_the_sync_saw() -> None:
    resources = [res("Deployment", "web", 2), res("MCPReadiness", "gate", 5), res("Deployment", "later", 8)]
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5, gate_resource="MCPReadiness/gate")
    seen = [result("Deployment", "web"), result("MCPReadiness", "gate", "Running")]
    running = in_tree(resources, seen, sync="OutOfSync", health="Progressing", phase="Running")
    out = assess_application(running, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.PASS, "ApplicationSynced"), out.message
    assert out.observed["resourceHealth"].startswith("from the sync result")

    # the wave's Deployment not yet seen Healthy by this sync: its health is unknown, not assumed
    for web in (result("Deployment", "web", "Running"), result("Deployment", "other")):
        pending = in_tree(resources, [web], sync="OutOfSync", health="Progressing", phase="Running")
        out = assess_application(pending, ref, "test")
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning"), out.message
        assert out.findings[0].observed == "wave 2: Synced/Unknown"
    # a hook's Succeeded says nothing of a resource of the same name
    hooked = in_tree(resources, [result("Deployment", "web", hookType="PreSync")], health="Progressing",
                     sync="OutOfSync", phase="Running")  # fmt: skip
    assert assess_application(hooked, ref, "test").outcome == Verdict.INCONCLUSIVE


def test_argo_cd_3_finished_sync_is_judged_by_the_applications_health() -> None:
    # a single-step sync leaves its resources at Running: the Application's health decides
    resources = [res("ConfigMap", "web-config", -1), res("Deployment", "web")]
    seen = [result("ConfigMap", "web-config", "Running"), result("Deployment", "web", "Running")]
    out = assess_application(in_tree(resources, seen), REF, "test")
    assert (out.outcome, out.reason) == (Verdict.PASS, "ApplicationSynced"), out.message
    degraded = assess_application(in_tree(resources, seen, health="Degraded"), REF, "test")
    assert (degraded.outcome, degraded.reason) == (Verdict.FAIL, "ApplicationNotHealthy")
    # while a sync runs, a resource it has not seen Healthy is pending, whatever the app says
    running = in_tree(resources, seen, phase="Running")
    out = assess_application(running, REF, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning"), out.message
    assert [f.observed for f in out.findings] == ["wave -1: Synced/Unknown", "wave 0: Synced/Unknown"]
    # the same Application in Argo CD 2's form (health inline): absent health is a kind without one
    inline = app(resources=[res("ConfigMap", "web-config", -1, health=None), res("Deployment", "web")])
    assert assess_application(inline, REF, "test").outcome == Verdict.PASS


def test_observed_says_what_was_read_and_what_was_required() -> None:
    out = assess_application(app(), REF, "test")
    assert out.observed == {
        "syncStatus": "Synced",
        "syncRevision": SHA,
        "healthStatus": "Healthy",
        "operationPhase": "Succeeded",
        "expectedRevision": f"{SHA} (spec)",
    }
    gated = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5)
    resources = [res("ConfigMap", "web-config", -1), res("Deployment", "web")]
    seen = [result("ConfigMap", "web-config", "Running"), result("Deployment", "web", "Running")]
    out = assess_application(in_tree(resources, seen, sync="OutOfSync", health="Degraded"), gated, "test")
    assert out.observed == {
        "syncStatus": "OutOfSync",
        "syncRevision": SHA,
        "healthStatus": "Degraded",
        "operationPhase": "Succeeded",
        "gateWave": "5",
        "resourceHealth": "from the sync result (Argo CD keeps it in its resource tree)",
    }
    bare = ArgoApplicationRef("web")
    tracked = assess_application(app(target="main"), bare, "test")
    assert tracked.observed["expectedRevision"] == f"{SHA} (status.operationState.syncResult.revision)"


def test_each_verdict_has_its_exact_reason_and_message() -> None:
    failed = app(phase="Failed")
    failed["status"]["operationState"]["message"] = "one or more objects failed to apply"
    cases: list[tuple[dict[str, Any], Verdict, str, str]] = [
        (app(), Verdict.PASS, "ApplicationSynced", f"Synced to {SHA}, Healthy, sync Succeeded"),
        (app(sync="OutOfSync"), Verdict.FAIL, "ApplicationOutOfSync", "sync status is OutOfSync"),
        (app(health="Degraded"), Verdict.FAIL, "ApplicationNotHealthy", "health is Degraded"),
        (app(health="Missing"), Verdict.FAIL, "ApplicationNotHealthy", "health is Missing"),
        # only a gate inside a running sync may see the app Progressing; after the sync it is not done
        (app(health="Progressing"), Verdict.INCONCLUSIVE, "ApplicationNotHealthy", "health is Progressing"),
        (app(health="Suspended"), Verdict.INCONCLUSIVE, "ApplicationNotHealthy", "health is Suspended"),
        (
            app(revision=OLDSHA),
            Verdict.FAIL,
            "RevisionMismatch",
            f"synced revision {OLDSHA}, expected {SHA}",
        ),
        (failed, Verdict.FAIL, "SyncOperationFailed", "sync Failed: one or more objects failed to apply"),
        (app(phase="Error"), Verdict.FAIL, "SyncOperationFailed", "sync Error"),  # no message: no colon
        # everything is done but the operation has not ended, or a sync runs with no gate wave given
        (app(phase="Terminating"), Verdict.INCONCLUSIVE, "SyncNotFinished", "sync operation is Terminating"),
        (app(phase="Running"), Verdict.INCONCLUSIVE, "SyncWaveRunning", "sync operation is Running"),
    ]
    for obj, outcome, reason, message in cases:
        out = assess_application(obj, REF, "test")
        assert (out.outcome, out.reason, out.message) == (outcome, reason, f"Application web: {message}")
        assert out.findings == []


def test_missing_status_says_which_part_is_missing() -> None:
    for part in ("sync", "operationState"):
        obj = app()
        del obj["status"][part]
        out = assess_application(obj, REF, "test")
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ApplicationStatusMissing")
        assert out.message == f"Application web: no status.{part} reported yet"


def test_no_expected_revision_anywhere_is_inconclusive() -> None:
    bare = ArgoApplicationRef("web")
    obj = app(target="main")
    obj["status"]["operationState"]["syncResult"]["revision"] = ""  # not synced yet
    assert expected_revision(obj, bare) == (None, "none")
    del obj["status"]["operationState"]["syncResult"]
    assert expected_revision(obj, bare) == (None, "none")
    out = assess_application(obj, bare, "test")
    assert (out.outcome, out.reason, out.message) == (
        Verdict.INCONCLUSIVE,
        "ExpectedRevisionUnknown",
        "Application web: no expected revision given and none can be resolved from the Application",
    )
    assert "expectedRevision" not in out.observed


def test_findings_carry_each_pending_resource_and_its_source() -> None:
    def finding(name: str, outcome: Verdict, reason: str, observed: str) -> Finding:
        return Finding(name, outcome, reason, observed, "Synced/Healthy", "Application argocd/web")

    resources = [res("Deployment", "web", 1, health="Degraded"), res("Service", "web", 2, sync="OutOfSync")]
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=3)
    failed = app(phase="Failed", resources=resources)
    failed["status"]["operationState"]["message"] = "one or more objects failed to apply"
    out = assess_application(failed, ref, "Application argocd/web")
    assert (out.outcome, out.reason) == (Verdict.FAIL, "SyncOperationFailed")
    assert out.findings == [
        finding("Deployment/web", Verdict.FAIL, "ResourceNotHealthy", "wave 1: Synced/Degraded"),
        finding("Service/web", Verdict.FAIL, "ResourceNotSynced", "wave 2: OutOfSync/Healthy"),
    ]
    # while the sync runs the same resources are pending, not failed
    out = assess_application(app(phase="Running", resources=resources), ref, "Application argocd/web")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning")
    assert out.message == "Application web: sync wave 1 is still running (Deployment/web, Service/web)"
    assert out.findings == [
        finding("Deployment/web", Verdict.INCONCLUSIVE, "ResourceNotHealthy", "wave 1: Synced/Degraded"),
        finding("Service/web", Verdict.INCONCLUSIVE, "ResourceNotSynced", "wave 2: OutOfSync/Healthy"),
    ]


def test_incomplete_waves_name_the_scope_and_the_resources() -> None:
    resources = [res("Deployment", "web", 1), res("Service", "web", 2, sync="OutOfSync")]
    whole = assess_application(app(resources=resources), REF, "test")
    assert (whole.outcome, whole.reason) == (Verdict.FAIL, "SyncWaveIncomplete")
    assert whole.message == "Application web: resources are not Synced and Healthy: Service/web"
    gated = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=3)
    out = assess_application(app(resources=resources), gated, "test")
    assert (out.outcome, out.reason) == (Verdict.FAIL, "SyncWaveIncomplete")
    assert (
        out.message
        == "Application web: resources at or before wave 3 are not Synced and Healthy: Service/web"
    )


def test_a_terminating_sync_is_still_running() -> None:
    resources = [res("Deployment", "web", health="Progressing")]
    out = assess_application(app(phase="Terminating", resources=resources), REF, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning")
    assert out.message == "Application web: sync wave 0 is still running (Deployment/web)"
    assert [f.outcome for f in out.findings] == [Verdict.INCONCLUSIVE]  # as the verdict: not ended
    # Argo CD 3: a resource the terminating sync has not seen Healthy is unknown, not done
    pending = in_tree(
        [res("Deployment", "web")], [result("Deployment", "web", "Running")], phase="Terminating"
    )
    out = assess_application(pending, REF, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning")
    assert [f.observed for f in out.findings] == ["wave 0: Synced/Unknown"]


def test_gate_inside_a_running_sync_passes_with_its_own_message_only_while_running() -> None:
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5)
    resources = [
        res("Deployment", "web", 2),
        res("Deployment", "later", 8, sync="OutOfSync", health="Missing"),
    ]
    running = app(sync="OutOfSync", health="Progressing", phase="Running", resources=resources)
    out = assess_application(running, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.PASS, "ApplicationSynced")
    assert out.message == f"Application web: Synced to {SHA}, Progressing, waves up to the gate's are done"
    # once the sync has ended, the gate wave excuses nothing: the app must be Synced and Healthy
    ended = app(health="Progressing", resources=[res("Deployment", "web", 2)])
    out = assess_application(ended, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ApplicationNotHealthy")
    out = assess_application(app(resources=[res("Deployment", "web", 2)]), ref, "test")
    assert out.message == f"Application web: Synced to {SHA}, Healthy, sync Succeeded"


def test_waves_up_to_the_gate_skip_hooks_the_gate_and_later_waves_in_any_order() -> None:
    resources = [
        res("Job", "migrate", -5, sync="OutOfSync", health="Progressing", hook=True),
        res("MCPReadiness", "gate", 5, health="Progressing"),
        res("Deployment", "later", 6, sync="OutOfSync", health="Missing"),  # just after the gate's wave
        res("Deployment", "web", 5, health="Progressing"),  # the gate's own wave counts
        res("ConfigMap", "web-config", 5, sync="OutOfSync", health=None),
        res("Service", "web", 1, sync="OutOfSync"),
    ]
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5, gate_resource="MCPReadiness/gate")
    running = app(sync="OutOfSync", health="Progressing", phase="Running", resources=resources)
    out = assess_application(running, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning")
    assert out.message == (
        "Application web: sync wave 1 is still running (Service/web, Deployment/web, ConfigMap/web-config)"
    )
    assert [(f.subject, f.reason, f.observed) for f in out.findings] == [
        ("Service/web", "ResourceNotSynced", "wave 1: OutOfSync/Healthy"),
        ("Deployment/web", "ResourceNotHealthy", "wave 5: Synced/Progressing"),
        ("ConfigMap/web-config", "ResourceNotSynced", "wave 5: OutOfSync/None"),
    ]


def test_wave_and_id_of_what_argo_cd_left_out_or_wrote_badly() -> None:
    assert resource_wave({"annotations": {"argocd.argoproj.io/sync-wave": "early"}}) == 0
    assert resource_wave({"syncWave": "1.5"}) == 0
    assert resource_id({"kind": "Deployment"}) == "Deployment/?"
    assert resource_id({"name": "web"}) == "?/web"


def test_argo_cd_3_sync_result_counts_only_for_the_same_group_kind_namespace_and_name() -> None:
    ref = ArgoApplicationRef("web", expected_revision=SHA, gate_wave=5)
    resources = [res("Deployment", "web", 2)]
    others = [
        result("Deployment", "web", group="extensions"),
        result("StatefulSet", "web"),
        result("Deployment", "web", namespace="staging"),
        result("Deployment", "web-canary"),
    ]
    for other in others:
        running = in_tree(resources, [other], sync="OutOfSync", health="Progressing", phase="Running")
        out = assess_application(running, ref, "test")
        assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning"), other
        assert [f.observed for f in out.findings] == ["wave 2: Synced/Unknown"], other
    # a core, cluster-scoped kind: Argo CD omits the empty group and namespace from status.resources
    # but writes them empty in the sync result; the two are the same resource
    namespace = {"version": "v1", "kind": "Namespace", "name": "web", "status": "Synced", "syncWave": -1}
    seen = [result("Namespace", "web", group="", namespace="")]
    running = in_tree([namespace], seen, sync="OutOfSync", health="Progressing", phase="Running")
    out = assess_application(running, ref, "test")
    assert (out.outcome, out.reason) == (Verdict.PASS, "ApplicationSynced"), out.message
