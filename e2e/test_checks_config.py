"""Config consistency against the real kube-apiserver and controller manager of the harness:
Deployments whose pods the local kubelet runs as processes, a ConfigMap change rolled out.

The Argo CD test here writes an Application's status by hand, in the shapes Argo CD's
application controller writes (status.sync, status.health, status.operationState,
status.resources with syncWave), to reach states a real sync passes through too fast to look at;
the Application CRD is Argo CD's own (from its module). e2e/test_argocd_sync.py checks the same
against a real Argo CD's sync.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from mcp_checks.config import (
    ArgoApplicationRef,
    ConfigConsistencySpec,
    ConfigContent,
    config_hash,
    run_config_consistency,
    short,
)
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_devcluster import argocd, stack

GATE = "mcp2026.io/config-loaded"  # a readiness gate that holds a new pod back until released
SECRET_VALUE = "tok-3f9a1c-very-secret"
SHA = "9b2d4e6f8a0c1e3f5a7b9c1d3e5f7a9b1c3d5e7f"


class Namespace:
    """kubectl and the Python client bound to one fresh namespace."""

    def __init__(self, kubeconfig: Path, name: str) -> None:
        self.kubeconfig, self.name = kubeconfig, name
        self.api = config.new_client_from_config(config_file=str(kubeconfig))

    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> Any:
        return stack.kubectl(self.kubeconfig, "-n", self.name, *args, input_text=input_text, check=check)

    def apply(self, obj: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(obj))

    def get(self, kind: str, name: str) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(self.kubectl("get", kind, name, "-o", "json").stdout)
        return got

    def pods(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            self.kubectl("get", "pods", "-l", selector, "-o", "json").stdout
        )["items"]
        return items

    def config_hash(self, config_map: str, secret: str) -> str:
        """What a chart would put in checksum/config: the documented hash of the content."""
        cm, sec = self.get("configmap", config_map), self.get("secret", secret)
        return config_hash(
            [
                ConfigContent("ConfigMap", config_map, cm.get("data", {}), cm.get("binaryData", {})),
                ConfigContent("Secret", secret, sec.get("data", {}), {}),
            ]
        )


@pytest.fixture
def ns(kubeconfig: Path) -> Iterator[Namespace]:
    name = f"e2e-cfg-{uuid.uuid4().hex[:8]}"
    stack.kubectl(kubeconfig, "create", "namespace", name)
    space = Namespace(kubeconfig, name)
    try:
        yield space
    finally:
        space.api.close()
        stack.kubectl(kubeconfig, "delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def argocd_crd(kubeconfig: Path) -> None:
    argocd.install_crds(kubeconfig)


def config_objects(ns: Namespace, mode: str) -> None:
    ns.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config"}, "data": {"mode": mode}}
    )
    token = base64.b64encode(SECRET_VALUE.encode()).decode()
    ns.apply(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-secret"}, "data": {"token": token}}
    )


def deployment(
    checksum: str, gate: bool = False, node_selector: dict[str, str] | None = None
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "nodeSelector": node_selector or {"mcp2026.io/local-runner": "true"},
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": "unused", "command": ["sleep", "3600"]}],
    }
    if gate:
        pod_spec["readinessGates"] = [{"conditionType": GATE}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": {"checksum/config": checksum}},
                "spec": pod_spec,
            },
        },
    }


def spec(ns: Namespace, **kw: Any) -> ConfigConsistencySpec:
    return ConfigConsistencySpec(ns.name, "web", config_maps=("web-config",), secrets=("web-secret",), **kw)


async def check(ns: Namespace, **kw: Any) -> CheckOutcome:
    out = await run_config_consistency(spec(ns, **kw), ns.api)
    text = json.dumps(asdict(out))
    assert SECRET_VALUE not in text and base64.b64encode(SECRET_VALUE.encode()).decode() not in text
    return out


def rolled_out(ns: Namespace) -> None:
    done = ns.kubectl("rollout", "status", "deployment/web", "--timeout=90s", check=False)
    assert done.returncode == 0, done.stderr


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


async def test_config_change_fails_while_old_pods_serve_and_passes_after_rollout(ns: Namespace) -> None:
    config_objects(ns, "v1")
    first = ns.config_hash("web-config", "web-secret")
    ns.apply(deployment(first))
    rolled_out(ns)
    out = await check(ns)
    assert (out.outcome, out.reason) == (Verdict.PASS, "ConfigRolledOut"), out
    assert out.observed["configHash"] == short(first) and out.observed["readyPods"] == "2"
    old_pods = sorted(p["metadata"]["name"] for p in ns.pods("app=web"))

    # the config changes; the Deployment does not yet
    config_objects(ns, "v2")
    second = ns.config_hash("web-config", "web-secret")
    assert second != first
    out = await check(ns)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "TemplateChecksumMismatch"), out

    # the new template rolls out, but its pods are held unready: the old ones keep serving
    ns.apply(deployment(second, gate=True))
    deadline = time.monotonic() + 60
    while True:
        new = [p for p in ns.pods("app=web") if p["metadata"]["name"] not in old_pods]
        if new and new[0]["status"].get("phase") == "Running":
            break
        assert time.monotonic() < deadline, "the new ReplicaSet's pod did not start"
        time.sleep(0.5)
    out = await check(ns)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "OldRevisionPodsReady"), out
    assert sorted(f.subject for f in out.findings) == old_pods
    assert all(f.observed == short(first) and f.threshold == short(second) for f in out.findings)
    assert all(name in out.message for name in old_pods)

    # release each new pod as a readiness controller would, until the rollout completes
    deadline = time.monotonic() + 120
    while ns.kubectl("rollout", "status", "deployment/web", "--timeout=1s", check=False).returncode != 0:
        for pod in ns.pods("app=web"):
            gated = {c["type"] for c in pod["status"].get("conditions", [])}
            if pod["metadata"]["name"] not in old_pods and GATE not in gated:
                patch = {"status": {"conditions": [{"type": GATE, "status": "True"}]}}
                ns.kubectl(
                    "patch",
                    "pod",
                    pod["metadata"]["name"],
                    "--subresource=status",
                    "--type=strategic",
                    "-p",
                    json.dumps(patch),
                    check=False,
                )
        assert time.monotonic() < deadline, "the rollout did not complete"
        time.sleep(0.5)
    deadline = time.monotonic() + 60
    while any(ready(p) and p["metadata"]["name"] in old_pods for p in ns.pods("app=web")):
        assert time.monotonic() < deadline, "old pods still ready"
        time.sleep(0.5)
    out = await check(ns)
    assert (out.outcome, out.reason) == (Verdict.PASS, "ConfigRolledOut"), out
    assert out.observed["configHash"] == short(second) and out.observed["readyPods"] == "2"


async def test_missing_objects_and_a_selector_without_pods_are_never_pass(ns: Namespace) -> None:
    out = await check(ns)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ConfigMapNotFound")
    assert f"ConfigMap {ns.name}/web-config" in out.message
    config_objects(ns, "v1")
    out = await check(ns)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "DeploymentNotFound")
    # pods that no node will run: the selector matches no ready pod
    ns.apply(deployment(ns.config_hash("web-config", "web-secret"), node_selector={"no-such": "node"}))
    deadline = time.monotonic() + 30
    while True:
        out = await check(ns)
        if out.reason != "RolloutNotObserved" and out.reason != "CurrentReplicaSetNotFound":
            break
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "NoReadyPods"), out


def application(ns: Namespace) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "web"},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://git.example/web.git", "path": "deploy", "targetRevision": SHA},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": ns.name},
        },
    }


def argo_status(
    ns: Namespace, *, revision: str, phase: str, web: tuple[str, str], gate: str
) -> dict[str, Any]:
    """Status as Argo CD writes it: syncWave omitted for wave 0, no health for a ConfigMap."""

    def res(
        kind: str, name: str, wave: int, sync: str, health: str | None, group: str = ""
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": group,
            "version": "v1",
            "kind": kind,
            "namespace": ns.name,
            "name": name,
            "status": sync,
        }
        if health:
            out["health"] = {"status": health}
        if wave:
            out["syncWave"] = wave
        return out

    running = phase == "Running"
    return {
        "sync": {"status": "OutOfSync" if running else "Synced", "revision": revision},
        "health": {"status": "Progressing" if running else "Healthy"},
        "operationState": {
            "operation": {"sync": {"revision": revision}},
            "phase": phase,
            "message": "waiting for healthy state of apps/Deployment/web"
            if running
            else "successfully synced",
            "startedAt": "2026-01-01T00:00:00Z",
            "syncResult": {"revision": revision},
        },
        "resources": [
            res("ConfigMap", "web-config", -1, "Synced", None),
            res("Secret", "web-secret", -1, "Synced", None),
            res("Deployment", "web", 1, web[0], web[1], "apps"),
            res("MCPReadiness", "release-gate", 2, "Synced", gate, "mcp2026.io"),
            res(
                "Service",
                "web-canary",
                3,
                "OutOfSync" if running else "Synced",
                "Missing" if running else "Healthy",
            ),
        ],
    }


async def test_argocd_application_sync_waves_and_revision(ns: Namespace, argocd_crd: None) -> None:
    config_objects(ns, "v1")
    ns.apply(deployment(ns.config_hash("web-config", "web-secret")))
    rolled_out(ns)
    ref = ArgoApplicationRef("web", ns.name, gate_wave=2, gate_resource="MCPReadiness/release-gate")

    out = await check(ns, application=ref)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "ApplicationNotFound"), out
    assert f"Application {ns.name}/web" in out.message

    ns.apply(application(ns))

    def write(**kw: Any) -> None:  # Argo CD's CRD has no status subresource: status goes with the object
        ns.kubectl(
            "patch", "application", "web", "--type=merge", "-p", json.dumps({"status": argo_status(ns, **kw)})
        )

    # wave 1 (the Deployment) is still progressing while the sync runs
    write(revision=SHA, phase="Running", web=("Synced", "Progressing"), gate="Progressing")
    out = await check(ns, application=ref)
    assert (out.outcome, out.reason) == (Verdict.INCONCLUSIVE, "SyncWaveRunning"), out
    assert "sync wave 1" in out.message and "Deployment/web" in out.message

    # waves up to the gate's are done; only the gate itself and wave 3 remain: the gate may pass
    write(revision=SHA, phase="Running", web=("Synced", "Healthy"), gate="Progressing")
    out = await check(ns, application=ref)
    assert (out.outcome, out.reason) == (Verdict.PASS, "ConfigRolledOut"), out
    assert out.observed["operationPhase"] == "Running" and out.observed["gateWave"] == "2"

    # the finished sync, at the revision the Application pins
    write(revision=SHA, phase="Succeeded", web=("Synced", "Healthy"), gate="Healthy")
    out = await check(ns, application=ArgoApplicationRef("web", ns.name))
    assert out.outcome == Verdict.PASS, out
    assert out.observed["expectedRevision"] == f"{SHA} (spec.source.targetRevision)"

    # Argo CD synced another revision than the one expected
    write(revision="0" * 40, phase="Succeeded", web=("Synced", "Healthy"), gate="Healthy")
    out = await check(ns, application=ArgoApplicationRef("web", ns.name))
    assert (out.outcome, out.reason) == (Verdict.FAIL, "RevisionMismatch"), out

    # a failed sync fails the gate even though the rollout is consistent
    status = argo_status(ns, revision=SHA, phase="Failed", web=("Synced", "Degraded"), gate="Healthy")
    status["operationState"]["message"] = "one or more objects failed to apply"
    ns.kubectl("patch", "application", "web", "--type=merge", "-p", json.dumps({"status": status}))
    out = await check(ns, application=ref)
    assert (out.outcome, out.reason) == (Verdict.FAIL, "SyncOperationFailed"), out
    assert "failed to apply" in out.message
