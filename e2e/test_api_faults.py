"""API faults: a control-plane component of the harness is stopped and started again (same binary,
same arguments, same environment, same data: the process read back from /proc and recorded in the
cluster's state so teardown stops the new one) while an MCPBenchmark runs. Nothing may be lost
(every shard result merged, none rejected, one Job, every pod run once), and the verdict must come
within 30 s of recovery, plus whatever load was still to run (issue 19: the API server killed for
about 13 s as the shards started stalled the barrier until its 600 s timeout; killed for 13 s
mid-load, both shards crashed on their result write). How long it took is printed: outage (stop
to /readyz), then the verdict's latency after recovery.

An outage longer than the operator's renew deadline (10 s: the SIGTERMed API server's own shutdown
plus its time down) ends the operator on purpose: it cannot renew its leader Lease, so it exits
without acting further. The test then plays the kubelet and starts it again (the same identity, as
a restarted container of the same pod), and checks that this was the only way it ended.

Only outages that end before a shard pod exits are staged: the harness's local kubelet reports a
pod's exit once and does not retry a status update that fails while the API server is away (a real
kubelet does), so a pod that ends during an outage would look Running for ever.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from mcp_devcluster import stack
from mcp_devcluster.certs import PkiPaths
from mcp_devcluster.cluster import ClusterState
from mcp_devcluster.processes import ManagedProcess, client_ssl_context, http_ok

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

GROUP, VERSION = "mcp2026.io", "v1alpha1"
UID_LABEL = "mcp2026.io/benchmark-uid"
SHARDS = 2
GRACE_S = 10.0
VERDICT_AFTER_RECOVERY_S = 30.0


@dataclass
class Restart:
    """One stop and start of a component, with its timings (monotonic)."""

    name: str
    stopped_at: float = 0.0  # the signal
    gone_at: float = 0.0  # the process ended
    started_at: float = 0.0
    ready_at: float = 0.0


def _proc_argv_env(pid: int) -> tuple[list[str], dict[str, str]]:
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    env = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
        if "=" in item
    )
    return argv, env


def _gone(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)  # the session started it: reap it
        if done == pid:
            return True
    except ChildProcessError:
        pass
    return not Path(f"/proc/{pid}").exists()


def _api_ready(cluster: ClusterState) -> bool:
    pki = PkiPaths(Path(cluster.state_dir) / "pki")
    context = client_ssl_context(pki.ca_cert, pki.admin_cert, pki.admin_key)
    return http_ok(f"{cluster.server}/readyz", context=context)


def _etcd_ready(cluster: ClusterState) -> bool:
    return http_ok(f"http://127.0.0.1:{cluster.etcd_port}/health")


def restart_component(cluster: ClusterState, name: str, sig: signal.Signals, down_s: float) -> Restart:
    """Stop ``name`` with ``sig`` (SIGKILL after ``GRACE_S``), leave it down ``down_s`` more, start
    it again as it ran; wait until the API server answers /readyz again."""
    record = Restart(name)
    pid = cluster.pids[name]
    argv, env = _proc_argv_env(pid)
    os.kill(pid, sig)
    record.stopped_at = time.monotonic()
    deadline = record.stopped_at + GRACE_S  # as a kubelet gives a static pod, shortened
    while not _gone(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    record.gone_at = time.monotonic()
    time.sleep(down_s)
    log = Path(cluster.state_dir) / "logs" / f"{name}-restarted-{time.time_ns()}.log"
    proc = ManagedProcess(name, argv, log, env=env)
    proc.start()
    record.started_at = time.monotonic()
    assert proc.popen is not None
    cluster.pids[name] = proc.popen.pid  # teardown stops the process that runs now
    cluster.save()
    deadline = record.started_at + 90
    while not ((name != "etcd" or _etcd_ready(cluster)) and _api_ready(cluster)):
        assert proc.exited() is None, f"{name} exited again: {proc.log_tail()}"
        assert time.monotonic() < deadline, f"{name} not ready again: {proc.log_tail()}"
        time.sleep(0.05)
    record.ready_at = time.monotonic()
    return record


def _benchmark(api: client.ApiClient, namespace: str, name: str, url: str, duration_s: float) -> str:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "MCPBenchmark",
        "metadata": {"name": name},
        "spec": {
            "target": {"url": url, "backend": "http", "path": "/health"},
            "load": {"concurrency": [2], "durationSeconds": duration_s},
            "shards": SHARDS,
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
        },
    }
    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "mcpbenchmarks", body
    )
    return str(created["metadata"]["uid"])


def _pod_phases(api: client.ApiClient, namespace: str) -> list[str]:
    return sorted(str(p.status.phase) for p in client.CoreV1Api(api).list_namespaced_pod(namespace).items)


def _play_kubelet(operator: Any, kubeconfig: Path, log_dir: Path, ended: list[str]) -> None:
    """Start the operator again if it has exited, as the kubelet restarts a container; ``ended``
    collects the end of each exited one's log."""
    if operator.process.exited() is None:
        return
    ended.append(operator.process.log_tail(3000))
    replacement = stack.start_operator(kubeconfig, log_dir)
    operator.process = replacement.process  # the session fixture stops whichever runs last
    operator.metrics_url = replacement.metrics_url
    operator.liveness_url = replacement.liveness_url


def _until(check: Callable[[], bool], what: str, timeout_s: float = 120) -> float:
    """Poll through an outage (a refused connection is just not yet); returns when it held."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return time.monotonic()
        except Exception:  # the API server is away
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@dataclass(frozen=True)
class Fault:
    name: str
    component: str
    sig: signal.Signals
    duration_s: float  # of each level of the benchmark
    # "starting": the shard pods run and the barrier has not released them yet; "running": 2 s
    # into the measured level; "finished": once every shard pod has ended
    when: str
    down_s: float  # after the process is gone, before it starts again


FAULTS = [
    Fault("apiserver-killed-as-shards-start", "kube-apiserver", signal.SIGKILL, 4, "starting", 13),
    Fault("apiserver-killed-while-shards-run", "kube-apiserver", signal.SIGKILL, 15, "running", 13),
    Fault("apiserver-restarted-as-shards-finish", "kube-apiserver", signal.SIGTERM, 3, "finished", 3),
    Fault("etcd-killed-while-shards-run", "etcd", signal.SIGKILL, 15, "running", 3),
]
DEFAULT_FAULTS = {"apiserver-killed-as-shards-start", "apiserver-killed-while-shards-run"}


def _level_starts(api: client.ApiClient, namespace: str, uid: str) -> dict[str, int]:
    """The start barrier's levels (index -> Unix ns) as the operator wrote them; {} before."""
    jobs = client.BatchV1Api(api).list_namespaced_job(namespace, label_selector=f"{UID_LABEL}={uid}")
    for job in jobs.items:
        try:
            start = client.CoreV1Api(api).read_namespaced_config_map(f"{job.metadata.name}-start", namespace)
        except client.ApiException:
            continue
        text = (start.data or {}).get("start.json") or "{}"
        return {k: int(v) for k, v in (json.loads(text).get("levels") or {}).items()}
    return {}


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(f, id=f.name, marks=() if f.name in DEFAULT_FAULTS else (pytest.mark.long,))
        for f in FAULTS
    ],
)
def test_a_benchmark_survives_a_control_plane_restart(
    fault: Fault,
    kube: Any,
    refserver: str,
    operator: Any,
    cluster: ClusterState,
    api: client.ApiClient,
    tmp_path: Path,
) -> None:
    name = "api-fault"
    uid = _benchmark(api, kube.namespace, name, refserver, fault.duration_s)
    running = ["Running"] * SHARDS
    _until(lambda: _pod_phases(api, kube.namespace) == running, "the shard pods running")
    if fault.when == "starting":
        pass  # at once: the shards are still starting (or waiting at the barrier)
    elif fault.when == "running":  # 2 s into the level; the shards measure on for duration_s - 2
        _until(
            lambda: time.time_ns() > _level_starts(api, kube.namespace, uid).get("0", time.time_ns()) + 2e9,
            "the level measuring",
        )
    else:
        _until(lambda: _pod_phases(api, kube.namespace) == ["Succeeded"] * SHARDS, "the shard pods ended")
    released_before = bool(_level_starts(api, kube.namespace, uid))
    restart = restart_component(cluster, fault.component, fault.sig, fault.down_s)
    custom = client.CustomObjectsApi(api)
    ended: list[str] = []

    def job_complete() -> bool:
        # an operator that lost its Lease in the outage is started again here too: shards still
        # waiting at the start barrier (slow to start on a busy host) need it to write their start
        _play_kubelet(operator, kube.kubeconfig, tmp_path, ended)
        jobs = client.BatchV1Api(api).list_namespaced_job(kube.namespace, label_selector=f"{UID_LABEL}={uid}")
        return any(
            c.type == "Complete" and c.status == "True" for j in jobs.items for c in j.status.conditions or []
        )

    def ready() -> bool:
        _play_kubelet(operator, kube.kubeconfig, tmp_path, ended)
        obj = custom.get_namespaced_custom_object(GROUP, VERSION, kube.namespace, "mcpbenchmarks", name)
        return stack.condition_of(obj).get("status") in ("True", "False")

    # the verdict does not wait for the Job controller's Complete (its informers relist with
    # backoff after an outage: 25 s, and more than 2 minutes, were seen): each index's pod
    # Succeeded is the same fact, read from the pods
    decided_at = _until(ready, "a verdict")
    completed = job_complete()
    # the load still to run once the API server was back: the whole level (and the barrier's
    # 2 s lead) when the shards had not been released before the outage, else what was left of it
    ready_wall_ns = time.time_ns() - (time.monotonic() - restart.ready_at) * 1e9
    level_start = _level_starts(api, kube.namespace, uid).get("0")
    if level_start is None or not released_before:
        load_left_s = fault.duration_s + 2.0
    else:
        load_left_s = max(0.0, (level_start + fault.duration_s * 1e9 - ready_wall_ns) / 1e9)
    latency_s = decided_at - restart.ready_at
    stopping_s, back_s = restart.gone_at - restart.stopped_at, restart.ready_at - restart.stopped_at
    print(
        f"\n[{fault.name}] {fault.component} {fault.sig.name}: gone {stopping_s:.2f}s after the signal, "
        f"started again {fault.down_s:.0f}s later, ready {back_s:.2f}s after the signal; verdict "
        f"{latency_s:+.2f}s from then, the Job {'Complete' if completed else 'not Complete yet'} "
        f"({load_left_s:.1f}s of load was still to run; the barrier "
        f"{'had' if released_before else 'had not'} released the shards before the outage)"
        + (f"; the operator lost its Lease in the outage, started again {len(ended)}x" if ended else "")
    )
    assert latency_s <= VERDICT_AFTER_RECOVERY_S + load_left_s, (latency_s, load_left_s)

    obj = custom.get_namespaced_custom_object(GROUP, VERSION, kube.namespace, "mcpbenchmarks", name)
    status = obj["status"]
    assert stack.condition_of(obj)["status"] == "True" and status["verdict"] == "Pass", status
    assert status["shards"] == {
        "expected": SHARDS,
        "reported": SHARDS,
        "rejected": 0,
        "succeeded": SHARDS,
        "failed": 0,
    }, status
    jobs = client.BatchV1Api(api).list_namespaced_job(kube.namespace, label_selector=f"{UID_LABEL}={uid}")
    assert [j.metadata.name for j in jobs.items] == [status["jobName"]]
    assert _pod_phases(api, kube.namespace) == ["Succeeded"] * SHARDS  # every pod ran once
    assert not [e for e in kube.events(name) if e["reason"] == "ShardResultRejected"]

    # the operator and the rest of the control plane came through it; the operator may only have
    # ended because it could not renew its Lease (never a crash), and was started again
    assert operator.process.exited() is None, operator.process.log_tail()
    for tail in ended:
        assert "leadership lost" in tail, tail
    for component, pid in cluster.pids.items():
        assert Path(f"/proc/{pid}").exists(), f"{component} is gone"
    nodes = client.CoreV1Api(api).list_node().items
    assert all(
        any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []) for node in nodes
    )
