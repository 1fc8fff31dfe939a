"""Release gating end to end: the sync sequence of a GitOps tool, played without Argo CD against
the real API server, controller manager, local kubelet, service proxy and operator.

The construction, and why it is honest:

* The workload is a Deployment of two replicas of the reference server (``mcp_refserver``), each
  a real process on its own pod IP, behind a Service whose ClusterIP the harness's service proxy
  forwards to the *ready* pods; the rollout is a real RollingUpdate (maxSurge 1, maxUnavailable
  0) driven by the controller manager, so during a rollout the Service answers from old and new
  pods alike, as in a cluster.
* The pods' readinessProbe is the shallow ``/health``; the gate probes what users need,
  the Triton/KServe model-readiness endpoint ``/v2/models/refmodel/ready``, through the Service
  (``spec.target.url`` is the ClusterIP, unchanged across releases).
* Release N serves the model ``refmodel``: healthy. Release N+1 is a broken build: it serves
  ``refmodel-next`` instead, so its pods are Ready (``/health`` answers) and the rollout
  succeeds, but the model the gate requires is not loaded and the endpoint answers 400: the
  gate fails. Release N+2 serves ``refmodel`` again with a new server version (a new pod
  template), with the MCPReadiness manifest re-applied unchanged.
* A sync is one ``kubectl apply`` of the release's manifests, as Argo CD applies them; the
  gate's ``spec.release`` carries the release (as a Helm value set from the Application's
  revision would), and ``spec.watch`` names the Deployment. The hook is ``mcp-check gate`` run
  as a process (for N+2 as the kubectl plugin ``kubectl mcp gate``), and, for N and N+1, also the
  PostSync and SyncFail Jobs of ``manifests/argocd/`` as written (RELEASE set, and a nodeSelector
  added so the local kubelet runs them as processes with their own ServiceAccount's token, RBAC
  and all, rather than a kwok node that runs nothing); BeforeHookCreation is played by deleting
  the previous sync's Job before creating the next.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from mcp_devcluster import releases, stack

ARGOCD = releases.ARGOCD_EXAMPLES
APP = releases.APP
GATE = releases.GATE
SERVICE_PORT = releases.SERVICE_PORT
TIMEOUT = "10m"
VENV_BIN = Path(sys.executable).parent
service, deployment, gate, hook = releases.service, releases.deployment, releases.gate, releases.hook


def sync(kube: Any, *docs: dict[str, Any]) -> float:
    """One sync: every manifest of the release in one apply; returns when it was applied."""
    kube.apply(yaml.safe_dump_all(list(docs)))
    return time.monotonic()


def gate_command(
    kube: Any, *argv: str, plugin: bool = False, junit: Path | None = None
) -> subprocess.Popen[str]:
    """``mcp-check gate`` as a hook container runs it (or ``kubectl mcp gate``, the plugin)."""
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # where kubectl finds kubectl-mcp
        "KUBECONFIG": str(kube.kubeconfig),  # kubectl passes a plugin its arguments, not its flags
    }
    head = [str(stack.kubectl_path()), "mcp"] if plugin else [str(VENV_BIN / "mcp-check")]
    cmd = [*head, "gate", f"mcpreadiness/{GATE}", "-n", kube.namespace, "--timeout", TIMEOUT, *argv]
    if junit is not None:
        cmd += ["--junit", str(junit)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def finish(proc: subprocess.Popen[str], timeout_s: float = 660) -> tuple[int, str, float]:
    out, _ = proc.communicate(timeout=timeout_s)
    return proc.returncode, out, time.monotonic()


def run_hook(kube: Any, docs: list[dict[str, Any]], timeout_s: float = 180) -> tuple[str, int | None]:
    """Create the hook Job (deleting the previous sync's first, as BeforeHookCreation does) and
    wait for it to end: its final condition and its container's exit code."""
    job = next(d for d in docs if d["kind"] == "Job")["metadata"]["name"]
    kube.run("delete", "job", job, "--ignore-not-found", "--wait=true", "--cascade=foreground")
    kube.apply(yaml.safe_dump_all(docs))
    deadline = time.monotonic() + timeout_s
    while True:
        status = kube.get("job", job).get("status") or {}
        ended = [
            c["type"]
            for c in status.get("conditions") or []
            if c["type"] in ("Complete", "Failed") and c["status"] == "True"
        ]
        if ended:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    pods = json.loads(kube.run("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout)["items"]
    codes = [
        s["state"]["terminated"]["exitCode"]
        for p in pods
        for s in (p.get("status") or {}).get("containerStatuses") or []
        if (s.get("state") or {}).get("terminated")
    ]
    return ended[0], codes[-1] if codes else None


def rfc3339_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Recorder:
    """Polls the gate every 50 ms in the background: what Ready said, for which release."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.seen: list[tuple[str, str | None, str | None]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                obj = self.kube.get("mcpreadiness", GATE)
            except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired):
                continue
            status = obj.get("status") or {}
            entry = (
                stack.condition_of(obj).get("status", ""),
                (status.get("release") or {}).get("workloadTemplateHash"),
                (status.get("release") or {}).get("completedAt"),
            )
            if not self.seen or self.seen[-1] != entry:
                self.seen.append(entry)
            self.stop.wait(0.05)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def test_argocd_hook_examples_pass_server_side_validation(kube: Any) -> None:
    for file in ("postsync-gate.yaml", "syncfail-gate.yaml"):
        applied = kube.run("apply", "--dry-run=server", "-f", str(ARGOCD / file), check=False)
        assert applied.returncode == 0, applied.stderr


def test_three_releases_one_evaluation_each_and_a_broken_one_fails_fast(kube: Any, tmp_path: Path) -> None:
    kube.apply(yaml.safe_dump(service()))
    cluster_ip = kube.get("service", APP)["spec"]["clusterIP"]
    url = f"http://{cluster_ip}:{SERVICE_PORT}"

    # --- release N: healthy; the gate passes ---
    sync(kube, deployment("1.0.0", "refmodel"), gate(url, "rel-1"))
    code, out, _ = finish(gate_command(kube, "--release", "rel-1", junit=tmp_path / "n.xml"))
    assert code == 0, out
    n = kube.get("mcpreadiness", GATE)
    status = n["status"]
    assert status["verdict"] == "Pass" and status["evaluations"] == 1, status
    assert status["release"]["revision"] == "rel-1" and status["release"]["trigger"] == "Spec"
    hash_n = status["release"]["workloadTemplateHash"]
    assert [c["name"] for c in status["checks"]] == ["rollout", "health-probe"]
    assert ET.parse(tmp_path / "n.xml").getroot().get("failures") == "0"
    print(f"release N: {out}")
    # the example's PostSync hook, as written, passes release N
    assert run_hook(kube, hook("postsync-gate.yaml", "rel-1")) == ("Complete", 0)

    # --- release N+1: a broken build; the gate must fail, fast, never on N's Pass ---
    assert stack.condition_of(n)["status"] == "True"  # what `kubectl wait` would have returned on
    since = rfc3339_now()
    applied = sync(kube, deployment("1.1.0", "refmodel-next"), gate(url, "rel-2"))
    by_release = gate_command(kube, "--release", "rel-2", junit=tmp_path / "n1.xml")
    by_time = gate_command(kube, "--since", since)
    posted_hook = run_hook(kube, hook("postsync-gate.yaml", "rel-2"))  # the example's Job, meanwhile
    hook_s = time.monotonic() - applied
    code, out, ended = finish(by_release)
    fail_s = ended - applied
    code_since, out_since, _ = finish(by_time)
    print(f"release N+1: the gate failed {fail_s:.1f}s after the sync (timeout {TIMEOUT}):\n{out}")
    print(f"release N+1: the example's PostSync Job ended {posted_hook} {hook_s:.1f}s after the sync")
    assert code == 1, out
    assert code_since == 1, out_since
    assert fail_s < 120, fail_s  # far below the 10-minute timeout: the Fail ends the wait
    assert posted_hook == ("Failed", 1) and hook_s < 180, (posted_hook, hook_s)
    # the sync failed: the example's SyncFail hook records the verdict and ends by itself
    assert run_hook(kube, hook("syncfail-gate.yaml", "rel-2")) == ("Complete", 0)
    n1 = kube.get("mcpreadiness", GATE)
    status = n1["status"]
    assert status["verdict"] == "Fail" and status["evaluations"] == 2, status
    assert status["release"]["revision"] == "rel-2" and status["release"]["workloadTemplateHash"] != hash_n
    rollout, probe = status["checks"]
    assert (rollout["verdict"], rollout["reason"]) == ("Pass", "RolloutSettled")  # judged after the rollout
    assert probe["verdict"] == "Fail" and probe["observed"]["succeeded"] == "0", probe
    report = ET.parse(tmp_path / "n1.xml").getroot()
    assert report.get("failures") == "1" and report.find("testcase[@name='health-probe']/failure") is not None
    hash_n1 = status["release"]["workloadTemplateHash"]

    # --- release N+2: the MCPReadiness manifest unchanged; the watch starts the evaluation ---
    generation = n1["metadata"]["generation"]
    since = rfc3339_now()
    with Recorder(kube) as recorder:
        sync(kube, deployment("1.2.0", "refmodel"), gate(url, "rel-2"))  # the gate exactly as before
        code, out, _ = finish(gate_command(kube, "--since", since, plugin=True))
        time.sleep(3)  # a second round for the same release would start now: give it the chance
    print(f"release N+2 (kubectl mcp gate): {out}")
    assert code == 0, out
    n2 = kube.get("mcpreadiness", GATE)
    status = n2["status"]
    assert n2["metadata"]["generation"] == generation  # the gate itself did not change
    assert status["verdict"] == "Pass" and status["evaluations"] == 3, status  # one more, exactly
    release = status["release"]
    assert release["trigger"] == "Watch" and release["revision"] == "rel-2"
    assert release["workloadTemplateHash"] not in (hash_n, hash_n1)
    assert release["startedAt"] >= since
    assert [h.get("trigger") for h in status["history"]] == ["Spec", "Spec", "Watch"]
    # Ready was Unknown while the evaluation of N+2 ran (not left at N+1's False throughout)
    hash_n2 = release["workloadTemplateHash"]
    assert ("Unknown", hash_n2, None) in recorder.seen, recorder.seen
    assert recorder.seen[-1][:2] == ("True", hash_n2)
    events = [e for e in kube.events(GATE) if e["reason"] in ("Ready", "HealthBelowThreshold")]
    assert sum(e.get("count", 1) for e in events) == 3, events  # one verdict event per release
