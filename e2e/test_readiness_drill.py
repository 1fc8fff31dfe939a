"""MCPReadiness drills through the real operator: staged load against the reference server,
faults on a Deployment that kwok runs, the KPI board as the verdict, and every fault reverted
on every path (success, a namespace that did not opt in, abort, deletion, an operator SIGKILLed
mid-drill), each checked through the API.

The load and the sentinel probe go to the reference server on loopback; the faulted Deployment
runs on the kwok node, so the faults here prove the journal and the reverts, not recovery
times (those need pods that serve, see the harness's service proxy).
"""

from __future__ import annotations

import json
import time
from typing import Any

from mcp_devcluster import stack

OPT_IN = "mcp2026.io/fault-injection=enabled"


def _gate(name: str, url: str, drill: dict[str, Any], ratio: float = 0.98) -> str:
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 100, "minSuccessRatio": 0.99, "maxProberLagMs": 250}},
        "drill": {"kpis": {"healthSuccessRatio": ratio}, **drill},
    }
    return stack.custom_resource("MCPReadiness", name, spec)


def _replicas(kube: Any, name: str = "srv") -> int:
    return int(kube.get("deployment", name)["spec"]["replicas"])


def _faults(kube: Any, name: str) -> list[dict[str, Any]]:
    return list((kube.get("mcpreadiness", name).get("status") or {}).get("faults") or [])


def _setup(kube: Any, opt_in: bool = True) -> None:
    if opt_in:
        kube.run("label", "namespace", kube.namespace, OPT_IN)
    kube.apply(stack.kwok_deployment())
    stack.until(
        lambda: int(kube.get("deployment", "srv").get("status", {}).get("readyReplicas") or 0) == 3,
        "srv ready",
    )


SCALE_DOWN = {"kind": "scaleDown", "workload": "srv", "replicas": 1, "atSeconds": 0.2}


def test_a_profile_drill_fills_its_kpi_board_and_reverts_its_fault(kube: Any, refserver: str) -> None:
    """The fault scales down a kwok Deployment that does not serve the target: the target never
    failed, so its recovery was not measured (NoOutageObserved), which is no Pass."""
    _setup(kube)
    drill = {"profile": "MCP2026", "scale": 0.004, "stages": [{"name": "mixed", "faults": [SCALE_DOWN]}]}
    kube.apply(_gate("mcp2026", refserver, drill))
    waited = kube.wait("mcpreadiness/mcp2026", "condition=Complete", timeout_s=120)
    obj = kube.get("mcpreadiness", "mcp2026")
    status = obj["status"]
    assert waited.returncode == 0, json.dumps(status, indent=1)
    assert [s["name"] for s in status["plan"]] == ["baseline", "mixed", "spike"]  # the profile, expanded
    assert status["stage"] == "3/3" and all(s["phase"] == "Done" for s in status["stages"])
    assert all(float(s["p99Ms"]) > 0 for s in status["stages"])
    (fault,) = status["faults"]
    assert (fault["kind"], fault["stage"], fault["phase"]) == ("scaleDown", "mixed", "Reverted")
    assert fault["injectedAt"] and fault["revertedAt"] and json.loads(fault["undo"])
    assert _replicas(kube) == 3  # restored, checked through the API
    kpis = {k["name"]: k for k in status["kpis"]}
    assert kpis["healthSuccessRatio"]["mark"] == "✓", kpis
    recovery = kpis["recoverySeconds"]
    assert (recovery["verdict"], recovery["mark"]) == ("Inconclusive", "?"), recovery
    assert "no observable failure" in recovery["measured"], recovery
    assert stack.condition_of(obj, "FaultsReverted")["status"] == "True"
    ready = stack.condition_of(obj)
    # not Ready on a fault that did not bite (the recovery row comes before the load generator's,
    # which a busy host may also flag Inconclusive): never a failure blamed on the service
    assert (ready["status"], ready["reason"]) == ("False", "NoOutageObserved"), status["checks"]
    assert status["verdict"] == "Inconclusive", status["checks"]
    saturated = kpis["loadGenerator"]["verdict"] == "Inconclusive"
    if saturated:
        print(f"drill client bound on this host: {kpis['loadGenerator']['measured']}")
    table = kube.run("get", "mcpr", "mcp2026").stdout
    assert "3/3" in table


def test_a_namespace_that_did_not_opt_in_is_never_touched(kube: Any, refserver: str) -> None:
    _setup(kube, opt_in=False)
    drill = {"stages": [{"name": "only", "load": {"rate": 20, "durationSeconds": 1}, "faults": [SCALE_DOWN]}]}
    kube.apply(_gate("no-opt-in", refserver, drill))
    assert kube.wait("mcpreadiness/no-opt-in", "condition=Ready=false", timeout_s=90).returncode == 0
    status = kube.get("mcpreadiness", "no-opt-in")["status"]
    (fault,) = status["faults"]
    assert fault["phase"] == "Skipped" and "NamespaceNotOptedIn" in fault["message"]
    assert status["verdict"] == "Error" and _replicas(kube) == 3
    assert any(c["reason"] == "NamespaceNotOptedIn" for c in status["checks"])


def _long_drill(dry_run: bool = False) -> dict[str, Any]:
    stage = {"name": "long", "load": {"rate": 5, "durationSeconds": 120}, "faults": [SCALE_DOWN]}
    return {"stages": [stage], "dryRun": dry_run}


def _injected(kube: Any, name: str) -> bool:
    return any(f["phase"] == "Injected" for f in _faults(kube, name))


def test_abort_reverts_at_once(kube: Any, refserver: str) -> None:
    _setup(kube)
    kube.apply(_gate("abort-me", refserver, _long_drill()))
    stack.until(lambda: _injected(kube, "abort-me") and _replicas(kube) == 1, "the fault is in place")
    started = time.monotonic()
    kube.run("patch", "mcpreadiness", "abort-me", "--type=merge", "-p", '{"spec":{"drill":{"abort":true}}}')
    stack.until(lambda: _replicas(kube) == 3, "replicas restored after abort", timeout_s=30)
    stack.until(
        lambda: (kube.get("mcpreadiness", "abort-me").get("status") or {}).get("phase") == "Aborted",
        "Aborted",
    )
    print(f"abort to revert: {time.monotonic() - started:.2f}s")
    # the run is over: kubectl wait --for=condition=Complete returns, and Ready says how it ended
    assert kube.wait("mcpreadiness/abort-me", "condition=Complete", timeout_s=30).returncode == 0
    obj = kube.get("mcpreadiness", "abort-me")
    assert stack.condition_of(obj)["reason"] == "DrillAborted" and obj["status"]["verdict"] == "Inconclusive"
    assert stack.condition_of(obj, "Complete")["reason"] == "DrillAborted"
    assert [f["phase"] for f in obj["status"]["faults"]] == ["Reverted"]
    assert [s["phase"] for s in obj["status"]["stages"]] == ["Stopped"]  # never Running for ever
    stack.until(
        lambda: (
            {"FaultInjected", "FaultReverted", "DrillAborted"}
            <= {e["reason"] for e in kube.events("abort-me")}
        ),
        "events for the fault, its revert and the abort",
    )


def test_deleting_a_drill_reverts_before_the_object_goes(kube: Any, refserver: str) -> None:
    _setup(kube)
    kube.apply(_gate("delete-me", refserver, _long_drill()))
    stack.until(lambda: _injected(kube, "delete-me") and _replicas(kube) == 1, "the fault is in place")
    kube.run("delete", "mcpreadiness", "delete-me", "--wait=true", "--timeout=60s")
    assert _replicas(kube) == 3


def test_dry_run_plans_and_touches_nothing(kube: Any, refserver: str) -> None:
    _setup(kube)
    drill = {"stages": [{"name": "s", "load": {"rate": 20, "durationSeconds": 1}, "faults": [SCALE_DOWN]}]}
    kube.apply(_gate("dry", refserver, {**drill, "dryRun": True}))
    assert kube.wait("mcpreadiness/dry", "condition=Complete", timeout_s=90).returncode == 0
    (fault,) = _faults(kube, "dry")
    assert fault["phase"] == "Skipped" and fault["message"].startswith("dry run: would scaleDown")
    assert fault["target"] and _replicas(kube) == 3


def test_an_operator_killed_mid_drill_reverts_on_restart(
    kube: Any, refserver: str, operator: Any, tmp_path: Any
) -> None:
    _setup(kube)
    kube.apply(_gate("crash", refserver, _long_drill()))
    stack.until(lambda: _injected(kube, "crash") and _replicas(kube) == 1, "the fault is in place")
    operator.process.popen.kill()  # SIGKILL: no finally, no finalizer, nothing reverted
    operator.process.popen.wait()
    time.sleep(1)
    assert _replicas(kube) == 1  # still broken while no operator runs
    started = time.monotonic()
    replacement = stack.start_operator(kube.kubeconfig, tmp_path)
    operator.process = replacement.process  # the session fixture stops whichever runs last
    operator.metrics_url = replacement.metrics_url
    stack.until(lambda: _replicas(kube) == 3, "the replayed journal restored the replicas", timeout_s=60)
    print(f"operator start to stale fault reverted: {time.monotonic() - started:.2f}s")
    stack.until(
        lambda: (kube.get("mcpreadiness", "crash").get("status") or {}).get("verdict") == "Inconclusive",
        "end",
    )
    obj = kube.get("mcpreadiness", "crash")
    assert stack.condition_of(obj)["reason"] == "DrillInterrupted"
    assert stack.condition_of(obj, "Complete")["status"] == "True"
    stack.until(lambda: "DrillInterrupted" in {e["reason"] for e in kube.events("crash")}, "an event")
    assert [f["phase"] for f in obj["status"]["faults"]] == ["Reverted"]
    assert "replayed" in obj["status"]["faults"][0]["message"]


def _thaw(kube: Any, name: str) -> None:
    """Remove what ``_freeze_scale`` made (its policy and binding)."""
    kube.run("delete", "validatingadmissionpolicybinding", name, check=False)
    kube.run("delete", "validatingadmissionpolicy", name, check=False)


def _reverted_and_gone(kube: Any, gate: str) -> None:
    """Once the scale thaws, the retried revert restores the replicas and the finalizer lets
    ``gate`` go."""
    stack.until(lambda: _replicas(kube) == 3, "the retried revert restored the replicas", timeout_s=90)
    stack.until(
        lambda: kube.run("get", "mcpreadiness", gate, check=False).returncode != 0,
        f"{gate} gone once its fault is reverted",
        timeout_s=60,
    )


def _freeze_scale(kube: Any, name: str) -> str:
    """A ValidatingAdmissionPolicy (the API server's own, no webhook) that refuses every change
    of a Deployment's scale in this namespace: the drill's revert then fails as it would against
    an admission policy, a quota or a lost permission."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["apps"],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],  # a patch is an UPDATE to admission
                        "resources": ["deployments", "deployments/scale"],
                    }
                ]
            },
            "validations": [{"expression": "false", "message": "scale frozen by the test"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": kube.namespace}}
            },
        },
    }
    kube.apply(json.dumps(policy))
    kube.apply(json.dumps(binding))
    return name


def _until_refused(kube: Any) -> None:
    def refused() -> bool:
        probe = kube.run("scale", "deployment", "srv", "--replicas=2", "--dry-run=server", check=False)
        return bool(probe.returncode != 0)  # a dry run: admission judges it, nothing is changed

    stack.until(refused, "the admission policy refuses scale changes", timeout_s=30)


def test_a_revert_that_fails_keeps_the_object_until_it_succeeds_or_is_released(
    kube: Any, refserver: str
) -> None:
    """The revert is refused (an admission policy freezes the Deployment's scale): the fault
    stays RevertFailed, is retried, deleting the object keeps it (finalizer) with a RevertFailed
    event; once the policy goes the retry reverts it and the object goes. A second object, left
    unreverted on purpose, is let go by the release annotation, with a FaultsAbandoned event."""
    _setup(kube)
    kube.apply(_gate("stuck", refserver, _long_drill()))
    stack.until(lambda: _injected(kube, "stuck") and _replicas(kube) == 1, "the fault is in place")
    frozen = _freeze_scale(kube, f"freeze-{kube.namespace}")
    try:
        _until_refused(kube)
        kube.run("delete", "mcpreadiness", "stuck", "--wait=false")
        stack.until(lambda: any(f["phase"] == "RevertFailed" for f in _faults(kube, "stuck")), "RevertFailed")
        stack.until(
            lambda: "RevertFailed" in {e["reason"] for e in kube.events("stuck")}, "a RevertFailed event"
        )
        time.sleep(3)
        assert kube.get("mcpreadiness", "stuck")["metadata"].get("deletionTimestamp")  # held, not gone
        assert _replicas(kube) == 1
    finally:
        _thaw(kube, frozen)
    _reverted_and_gone(kube, "stuck")

    kube.apply(_gate("abandoned", refserver, _long_drill()))
    stack.until(lambda: _injected(kube, "abandoned") and _replicas(kube) == 1, "the second fault is in place")
    _freeze_scale(kube, frozen)
    try:
        _until_refused(kube)
        kube.run("annotate", "mcpreadiness", "abandoned", "mcp2026.io/release-unreverted-faults=true")
        kube.run("delete", "mcpreadiness", "abandoned", "--wait=true", "--timeout=90s")
        assert "FaultsAbandoned" in {e["reason"] for e in kube.events("abandoned")}
        assert _replicas(kube) == 1  # left as it was: the person took the repair over
    finally:
        _thaw(kube, frozen)
    # the policy's removal reaches the API server's admission a moment later
    stack.until(
        lambda: kube.run("scale", "deployment", "srv", "--replicas=3", check=False).returncode == 0,
        "srv scaled back by hand once the policy is gone",
        timeout_s=30,
    )


def test_removing_the_drill_does_not_let_a_deleted_gate_go_with_its_fault_in_place(
    kube: Any, refserver: str
) -> None:
    """The stopped drill's revert is refused (the scale frozen), then ``spec.drill`` is removed
    and the gate deleted: the finalizer still holds it, since its journal shows the fault open,
    until the revert succeeds once the freeze is lifted. Before, removing ``spec.drill`` let
    kopf drop its finalizer, and the deletion left the Deployment at 1 replica, no event."""
    _setup(kube)
    kube.apply(_gate("undrilled", refserver, _long_drill()))
    stack.until(lambda: _injected(kube, "undrilled") and _replicas(kube) == 1, "the fault is in place")
    frozen = _freeze_scale(kube, f"freeze-undrilled-{kube.namespace}")
    try:
        _until_refused(kube)
        kube.run(
            "patch",
            "mcpreadiness",
            "undrilled",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/spec/drill"}]',
        )
        stack.until(
            lambda: any(f["phase"] == "RevertFailed" for f in _faults(kube, "undrilled")),
            "the stopped drill's revert failed",
            timeout_s=90,
        )
        kube.run("delete", "mcpreadiness", "undrilled", "--wait=false")
        time.sleep(5)
        held = kube.get("mcpreadiness", "undrilled")
        assert held["metadata"].get("deletionTimestamp") and "drill" not in held["spec"], held["metadata"]
        assert _replicas(kube) == 1
    finally:
        _thaw(kube, frozen)
    _reverted_and_gone(kube, "undrilled")
