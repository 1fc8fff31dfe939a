"""Two operators on one cluster act as one (issue 12, defect 10): only the holder of the leader
Lease runs handlers; the other waits on standby, handles nothing, and takes over when the leader
dies (after the lease duration, 15 s: a SIGKILLed leader cannot give the Lease back) or exits
cleanly (at its next look, 2 s: the leader gives the Lease back on its way out).

Through the API: every gate evaluated exactly once (``status.evaluations``, history, one verdict
event), the gates applied before the kill by the leader, those applied after it by the successor;
one Job for the benchmark the leader started, each shard pod run once, one verdict; the standby's
log names none of the test's objects while the leader lives. Each test prints the takeover time.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes import watch as kwatch

from mcp_devcluster import stack
from mcp_operator.api.readiness import DECIDED_PHASES

SHARDS = 2
LEASE = ("default", "mcp-operator")  # namespace, name: the operator's defaults outside a pod
BENCH_REASONS = stack.BENCHMARK_VERDICT_REASONS


def _gate(name: str, url: str) -> dict[str, Any]:
    probe = {"path": "/health", "requests": 100, "concurrency": 4, "minSuccessRatio": 0.99, "maxP99Ms": 1000}
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"name": name},
        "spec": {"target": {"url": url}, "checks": {"healthProbe": probe}},
    }


def _benchmark(url: str, duration_s: float) -> dict[str, Any]:
    spec = {
        "target": {"url": url, "backend": "http", "path": "/health"},
        "load": {"concurrency": [2], "durationSeconds": duration_s},
        "shards": SHARDS,
        "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
    }
    return yaml.safe_load(stack.custom_resource("MCPBenchmark", "bench", spec))


class Jobs:
    """Every Job and shard pod of the namespace, watched for the whole test, so one that came
    and went between two looks still counts."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.jobs: list[str] = []
        self.pods: dict[str, set[str]] = {}  # job name -> pod uids
        self._api = config.new_client_from_config(str(kubeconfig))
        self._stop = threading.Event()
        listers = (
            client.BatchV1Api(self._api).list_namespaced_job,
            client.CoreV1Api(self._api).list_namespaced_pod,
        )
        self._threads = [
            threading.Thread(target=self._follow, args=(lister, namespace), daemon=True) for lister in listers
        ]
        for thread in self._threads:
            thread.start()

    def _seen(self, obj: Any) -> None:
        meta = obj.metadata
        if obj.kind == "Job":
            if meta.name not in self.jobs:
                self.jobs.append(meta.name)
        elif "job-name" in (meta.labels or {}):
            self.pods.setdefault(meta.labels["job-name"], set()).add(meta.uid)

    def _follow(self, lister: Callable[..., Any], namespace: str) -> None:
        while not self._stop.is_set():
            try:
                for event in kwatch.Watch().stream(lister, namespace, timeout_seconds=2):
                    self._seen(event["object"])
            except Exception:  # a broken watch: look again
                time.sleep(0.2)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._api.close()


@pytest.fixture
def jobs(kube: Any) -> Iterator[Jobs]:
    watcher = Jobs(kube.kubeconfig, kube.namespace)
    try:
        yield watcher
    finally:
        watcher.close()


@pytest.fixture
def pair(kube: Any, operator: Any, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two operators of their own (the session's shared one stopped; the next test's fixture
    starts it again): ``a`` leads, ``b`` waits on standby."""
    stack.stop(operator.process)
    tag = uuid.uuid4().hex[:6]
    a = stack.start_operator(kube.kubeconfig, tmp_path / "a", identity=f"op-a-{tag}")
    b = stack.start_operator(kube.kubeconfig, tmp_path / "b", identity=f"op-b-{tag}", lead=False)
    try:
        stack.until(lambda: b.health() == {"standby": b.identity, "leader": a.identity}, "b on standby")
        yield a, b
    finally:
        for op in (a, b):
            stack.stop(op.process)
            print(f"{op.identity} log: {op.process.log_path}")


def _leader_gauge(op: Any) -> float:
    with urllib.request.urlopen(op.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("mcp_operator_leader ")]
    return float(line.split()[1])


def _lease(api: client.ApiClient) -> dict[str, Any]:
    lease = client.CoordinationV1Api(api).read_namespaced_lease(LEASE[1], LEASE[0])
    spec: dict[str, Any] = api.sanitize_for_serialization(lease.spec)
    return spec


def _items(kube: Any, kind: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(kube.run("get", kind, "-o", "json").stdout)["items"]
    return items


def _decided(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    ready = stack.condition_of(obj)
    return (
        status.get("observedGeneration") == obj["metadata"]["generation"]
        and ready.get("observedGeneration") == obj["metadata"]["generation"]
        and ready.get("status") in ("True", "False")
        and status.get("phase") in DECIDED_PHASES
    )


def _named_in_log(op: Any, namespace: str) -> set[str]:
    """The objects of ``namespace`` that lines of ``op``'s log name (a handler ran for them)."""
    return {str(record.get("name")) for record in op.log_records(namespace)}


def _verdict_events(kube: Any) -> Counter[str]:
    return Counter(
        f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}"
        for e in _items(kube, "events")
        if (e["reason"] == "Ready" and e["involvedObject"]["kind"] == "MCPReadiness")
        or (e["reason"] in BENCH_REASONS and e["involvedObject"]["kind"] == "MCPBenchmark")
    )


def test_two_operators_act_as_one_and_the_standby_takes_over_a_killed_leader(
    kube: Any, refserver: str, pair: tuple[Any, Any], jobs: Jobs, api: client.ApiClient
) -> None:
    a, b = pair
    before = [f"gate-a-{i}" for i in range(6)]
    after = [f"gate-b-{i}" for i in range(6)]
    assert (_leader_gauge(a), _leader_gauge(b)) == (1.0, 0.0)
    transitions = int(_lease(api).get("leaseTransitions") or 0)

    kube.apply(yaml.safe_dump_all([_gate(n, refserver) for n in before]))
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "mcp2026.io", "v1alpha1", kube.namespace, "mcpbenchmarks", _benchmark(refserver, 20.0)
    )

    def state() -> str:
        return f"\na: {a.process.log_tail(2000)}\nb: {b.process.log_tail(2000)}"

    # the leader decides the first gates and starts the benchmark's shards
    stack.until(
        lambda: len(gs := _items(kube, "mcpreadiness")) == len(before) and all(_decided(g) for g in gs),
        "the leader's verdicts",
        state=state,
    )
    stack.until(
        lambda: (
            sum(len(p) for p in jobs.pods.values()) == SHARDS
            and all(p["status"].get("phase") == "Running" for p in _items(kube, "pods"))
        ),
        "the shards running",
        state=state,
    )
    assert _named_in_log(b, kube.namespace) == set(), "the standby handled an object"
    assert b.health()["standby"] == b.identity

    # the leader dies as a container does (its whole process group); more gates arrive at once
    popen = a.process.popen
    assert popen is not None
    os.killpg(os.getpgid(popen.pid), signal.SIGKILL)
    killed = time.monotonic()
    popen.wait()
    kube.apply(yaml.safe_dump_all([_gate(n, refserver) for n in after]))
    stack.until(b.leading, "the standby to lead", timeout_s=60, state=state, interval_s=0.1)
    takeover = time.monotonic() - killed

    def everything() -> bool:
        objs = _items(kube, "mcpreadiness") + _items(kube, "mcpbenchmark")
        return len(objs) == len(before) + len(after) + 1 and all(_decided(o) for o in objs)

    stack.until(everything, "every verdict", timeout_s=180, state=state)
    finished = time.monotonic() - killed
    time.sleep(3)  # a second round, a replayed body or a late duplicate would show now

    gates = {g["metadata"]["name"]: g for g in _items(kube, "mcpreadiness")}
    for name, gate in gates.items():
        status = gate["status"]
        assert (status["evaluations"], len(status["history"])) == (1, 1), (name, status)
    (bench,) = _items(kube, "mcpbenchmark")
    assert len(jobs.jobs) == 1, jobs.jobs
    assert {job: len(uids) for job, uids in jobs.pods.items()} == {jobs.jobs[0]: SHARDS}, jobs.pods
    assert stack.condition_of(bench)["reason"] in BENCH_REASONS, bench["status"]
    created = [e for e in _items(kube, "events") if e["reason"] == "JobCreated"]
    assert len(created) <= 1, created
    expected = {f"MCPReadiness/{n}" for n in gates} | {"MCPBenchmark/bench"}
    # each event follows its verdict's status write (kopf posts it from its own queue)
    verdicts = stack.until(lambda: expected <= set(_verdict_events(kube)) and _verdict_events(kube), "events")
    assert verdicts == Counter({f"MCPReadiness/{n}": 1 for n in gates} | {"MCPBenchmark/bench": 1}), verdicts
    # who did what: the first gates were the leader's, the later ones the successor's
    assert {*before, "bench"} <= _named_in_log(a, kube.namespace), state()
    assert {*after, "bench"} <= _named_in_log(b, kube.namespace), state()
    lease = _lease(api)
    assert lease["holderIdentity"] == b.identity and int(lease["leaseTransitions"]) == transitions + 1
    assert _leader_gauge(b) == 1.0
    print(
        f"\nSIGKILL of the leader: the standby led {takeover:.1f}s later (lease 15 s, looks every 2 s); "
        f"{len(after)} gates applied after the kill and the benchmark across it decided "
        f"{finished:.1f}s after the kill; {len(gates)} gates evaluated once each, 1 Job, "
        f"{SHARDS} shard pods"
    )
    assert takeover < 15 + 2 + 10, takeover


def test_a_leader_that_exits_cleanly_hands_over_at_once(
    kube: Any, refserver: str, pair: tuple[Any, Any]
) -> None:
    a, b = pair
    stopped = time.monotonic()
    stack.stop(a.process)  # SIGTERM, as the kubelet sends: the Lease is given back on the way out
    exited = time.monotonic() - stopped
    assert a.process.exited() == 0, a.process.log_tail(3000)
    stack.until(
        b.leading, "the standby to lead", timeout_s=30, state=lambda: b.process.log_tail(3000), interval_s=0.1
    )
    took = time.monotonic() - stopped
    kube.apply(yaml.safe_dump(_gate("after-handover", refserver)))
    stack.until(lambda: _decided(kube.get("mcpreadiness", "after-handover")), "the successor's verdict")
    assert kube.get("mcpreadiness", "after-handover")["status"]["evaluations"] == 1
    print(
        f"\nclean exit of the leader: it exited {exited:.1f}s after SIGTERM, the standby led "
        f"{took - exited:.1f}s after that ({took:.1f}s after SIGTERM)"
    )
    assert took - exited < 2 + 5, (exited, took)


def test_a_leader_frozen_past_its_lease_wakes_up_and_exits_without_acting(
    kube: Any, refserver: str, pair: tuple[Any, Any]
) -> None:
    """A leader that stands still (stopped, starved, cut off) longer than its renew deadline must
    not act when it wakes: the standby leads by then. It exits at once, as a crash would."""
    a, b = pair
    popen = a.process.popen
    assert popen is not None
    group = os.getpgid(popen.pid)
    os.killpg(group, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        names = [f"frozen-{i}" for i in range(4)]
        kube.apply(yaml.safe_dump_all([_gate(n, refserver) for n in names]))
        stack.until(
            b.leading,
            "the standby to lead",
            timeout_s=60,
            state=lambda: b.process.log_tail(3000),
            interval_s=0.1,
        )
        takeover = time.monotonic() - frozen
        stack.until(
            lambda: len(gs := _items(kube, "mcpreadiness")) == len(names) and all(_decided(g) for g in gs),
            "the successor's verdicts",
        )
    finally:
        os.killpg(group, signal.SIGCONT)
    woke = time.monotonic()
    code = popen.wait(timeout=30)
    exited = time.monotonic() - woke
    log = a.process.log_tail(5000)
    assert code == 1 and "leadership lost" in log, log
    assert _named_in_log(a, kube.namespace) == set(), "the old leader acted after waking"
    time.sleep(3)
    for gate in _items(kube, "mcpreadiness"):
        assert gate["status"]["evaluations"] == 1, gate["status"]
    assert set(_verdict_events(kube).values()) == {1}
    print(
        f"\nleader frozen (SIGSTOP): the standby led {takeover:.1f}s later; the old leader, woken "
        f"(SIGCONT), exited {exited:.2f}s later with code {code}, having acted on nothing"
    )
