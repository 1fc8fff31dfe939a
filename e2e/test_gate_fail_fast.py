"""``mcp-check gate`` does not wait for what cannot come, against the real API server and operator.

The answers it relies on are the API server's own: a 404 on the namespace (none such), a 404 on
the list of a resource the server does not serve (the CRD not installed; played with a version
of ``mcp2026.io`` the CRD does not serve, since removing the CRD would delete every gate of the
session), a 200 list in a namespace that exists; and a gate the operator has evaluated, with no
``spec.watch`` and no ``spec.recheckIntervalSeconds``, whose verdict stands until its spec changes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from mcp_checks.exitcodes import for_verdict
from mcp_checks.gate.source import ApiSource

VENV_BIN = Path(sys.executable).parent
SAMPLE = "mcpreadiness-refserver.yaml"


def _gate(kubeconfig: Path, namespace: str, name: str, *argv: str) -> tuple[int, str, float]:
    began = time.monotonic()
    cmd = [str(VENV_BIN / "mcp-check"), "gate", f"mcpreadiness/{name}", "-n", namespace]
    done = subprocess.run(
        [*cmd, "--kubeconfig", str(kubeconfig), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def test_a_namespace_that_does_not_exist_is_exit_2_at_once(kubeconfig: Path) -> None:
    code, out, took = _gate(kubeconfig, "no-such-namespace", "release-gate", "--timeout", "10m")
    assert code == 2, out
    assert took < 60, took  # not the 10-minute timeout
    assert "cannot appear: namespace 'no-such-namespace' does not exist" in out, out


def test_a_kind_the_api_server_does_not_serve_cannot_appear(kubeconfig: Path, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    namespace = f"gate-{int(time.time() * 1000) % 10**8}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    try:
        served = ApiSource(api, namespace, "release-gate")
        assert served.get() is None and served.missing() is None  # may still be created: wait
        unserved = ApiSource(api, namespace, "release-gate")
        unserved.version = "v1alpha9"
        assert unserved.get() is None
        why = unserved.missing()
        assert why is not None and "mcpreadinesses.mcp2026.io/v1alpha9" in why and "not installed" in why
        code, out, _ = _gate(kubeconfig, namespace, "not-yet", "--timeout", "3s")
        assert code == 4 and "TimedOut" in out, out  # an existing namespace: the gate is waited for
    finally:
        core.delete_namespace(namespace)


def _evaluated(kube: Any, name: str, timeout_s: float) -> dict[str, Any]:
    """The gate's status once an evaluation of its current spec has completed."""
    deadline = time.monotonic() + timeout_s
    while True:
        obj = kube.get("mcpreadiness", name)
        status: dict[str, Any] = obj.get("status") or {}
        if (status.get("release") or {}).get("completedAt") and status.get("verdict"):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(1)


def test_a_finished_gate_nothing_evaluates_again_answers_at_once(
    kube: Any, refserver: str, sample: Any
) -> None:
    doc = yaml.safe_load(sample(SAMPLE, refserver))
    doc["metadata"]["name"] = "one-shot"
    doc["spec"]["checks"]["healthProbe"].update(requests=200, maxProberLagMs=10000)
    doc["spec"]["release"] = "r1"
    kube.apply(yaml.safe_dump(doc))
    status = _evaluated(kube, "one-shot", timeout_s=120)
    verdict = status["verdict"]
    expected = int(for_verdict(verdict))
    code, out, took = _gate(kube.kubeconfig, kube.namespace, "one-shot", "--timeout", "10m")
    assert code == expected and took < 60, out
    assert f"one-shot ({kube.namespace}): {verdict}" in out, out
    assert "note: --since " in out and "only a change of its spec" in out, out
    code, out, took = _gate(
        kube.kubeconfig, kube.namespace, "one-shot", "--release", "r2", "--timeout", "10m"
    )
    assert code == 3 and took < 60, out
    assert "ReleaseNotEvaluated" in out and f"judged r1 with {verdict}" in out, out
    code, out, _ = _gate(kube.kubeconfig, kube.namespace, "one-shot", "--release", "r1", "--timeout", "10m")
    assert code == expected and "note:" not in out, out  # the release asked is the one judged
