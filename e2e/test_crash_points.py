"""Crash at any point: the operator is SIGKILLed (its whole process group, as a container dies:
probe workers and drill loads with it) at one point of an MCPBenchmark's or an MCPReadiness
drill's life, a new operator is started, and what it leaves is checked through the API.

For a benchmark: exactly one Job per spec generation (every Job name ever seen is recorded while
the test polls), every shard pod run once, exactly one result object per shard and none rejected,
one ``JobCreated`` event at most, the report, and a verdict for the generation the spec has. For
a drill with a scaleDown fault on a kwok Deployment: the replicas restored, every journal entry
closed (Reverted or Skipped, never Planned or Injected), at most one fault injected, a verdict
(a drill the operator lost mid-run is Inconclusive/DrillInterrupted, never a pass), and the
object deletable afterwards (no finalizer left behind).

The points are conditions on what the API shows (a Job exists, a shard result is published, the
report is written while status is not yet Ready, ...) plus delays after them; each case prints
what the API showed at the moment of the kill, how long the new operator took to start and how
long to the verdict. Most cases are behind ``--long``; the default run keeps four.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes import watch as kwatch

from mcp_bench.results.document import loads_document
from mcp_devcluster import stack
from mcp_operator.api.readiness import DECIDED_PHASES
from mcp_operator.benchmark.contract import report_name

GROUP, VERSION = "mcp2026.io", "v1alpha1"
UID_LABEL = "mcp2026.io/benchmark-uid"
JOB_LABEL = "mcp2026.io/job"
OPT_IN = "mcp2026.io/fault-injection=enabled"
SHARDS = 2
POLL_S = 0.02
VERDICT_TIMEOUT_S = 150
VERDICT_REASONS = stack.BENCHMARK_VERDICT_REASONS


def crash_and_restart(operator: Any, kubeconfig: Path, log_dir: Path) -> tuple[float, float]:
    """SIGKILL the operator's process group, start a new operator; returns when it was started
    (monotonic) and how long it took to be live."""
    popen = operator.process.popen
    os.killpg(os.getpgid(popen.pid), signal.SIGKILL)
    popen.wait()
    started = time.monotonic()
    replacement = stack.start_operator(kubeconfig, log_dir)
    operator.process = replacement.process  # the session fixture stops whichever runs last
    operator.metrics_url = replacement.metrics_url
    operator.liveness_url = replacement.liveness_url
    return started, time.monotonic() - started


def _ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    return stack.condition_of(obj or {}, "Ready")


# -- MCPBenchmark ---------------------------------------------------------------------------------


@dataclass
class BenchView:
    """What the API shows of one benchmark at one moment."""

    obj: dict[str, Any] | None
    jobs: dict[str, dict[str, Any]]  # name -> Job (as JSON)
    maps: dict[str, bool]  # result/report ConfigMap name -> has data
    pods: dict[str, str]  # pod uid -> phase

    @property
    def status(self) -> dict[str, Any]:
        return (self.obj or {}).get("status") or {}

    def published(self, job: str | None = None) -> int:
        job = job or self.status.get("jobName") or next(iter(self.jobs), "")
        return sum(1 for name, full in self.maps.items() if name.startswith(f"{job}-shard-") and full)

    @property
    def job_complete(self) -> bool:
        return any(
            c.get("type") == "Complete" and c.get("status") == "True"
            for job in self.jobs.values()
            for c in (job.get("status") or {}).get("conditions") or []
        )

    @property
    def report(self) -> bool:
        return any(name.endswith("-report") for name in self.maps)

    @property
    def ready(self) -> str:
        return str(_ready(self.obj).get("status", ""))

    def decided(self, generation: int) -> bool:
        ready = _ready(self.obj)
        return (
            self.status.get("observedGeneration") == generation
            and ready.get("observedGeneration") == generation
            and ready.get("status") in ("True", "False")
        )

    def describe(self) -> str:
        return (
            f"phase={self.status.get('phase')} ready={self.ready or '-'} jobs={len(self.jobs)} "
            f"pods={sorted(self.pods.values())} published={self.published()} "
            f"jobComplete={self.job_complete} report={self.report}"
        )


class Recorder:
    """Watches the namespace's Jobs and pods in the background for the whole test, so a Job or a
    pod that came and went between two looks is still counted."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.namespace = namespace
        self.jobs: list[str] = []  # names, in the order they were first seen
        self.pods: dict[str, set[str]] = {}  # job-name label -> pod uids
        self._stop = threading.Event()
        self._api = config.new_client_from_config(str(kubeconfig))
        self._threads = [
            threading.Thread(target=self._follow, args=(kind,), daemon=True) for kind in ("jobs", "pods")
        ]
        for thread in self._threads:
            thread.start()

    def _follow(self, kind: str) -> None:
        lister = (
            client.BatchV1Api(self._api).list_namespaced_job
            if kind == "jobs"
            else client.CoreV1Api(self._api).list_namespaced_pod
        )
        while not self._stop.is_set():
            try:
                for event in kwatch.Watch().stream(lister, self.namespace, timeout_seconds=2):
                    meta = event["object"].metadata
                    if kind == "jobs" and meta.name not in self.jobs:
                        self.jobs.append(meta.name)
                    elif kind == "pods":
                        job = (meta.labels or {}).get("job-name", "")
                        self.pods.setdefault(job, set()).add(meta.uid)
            except Exception:  # the API server restarts in other tests; look again
                time.sleep(0.2)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._api.close()


class BenchWatch:
    """Reads one benchmark and its children through the API."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, uid: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.namespace, self.name, self.uid = namespace, name, uid

    def view(self) -> BenchView:
        obj = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "mcpbenchmarks", self.name
        )
        selector = f"{UID_LABEL}={self.uid}"
        sanitize = self.custom.api_client.sanitize_for_serialization
        jobs = {
            j.metadata.name: sanitize(j)
            for j in self.batch.list_namespaced_job(self.namespace, label_selector=selector).items
        }
        maps = {
            m.metadata.name: bool(m.data)
            for m in self.core.list_namespaced_config_map(self.namespace, label_selector=selector).items
        }
        pods = self.core.list_namespaced_pod(self.namespace).items
        return BenchView(obj, jobs, maps, {p.metadata.uid: str(p.status.phase) for p in pods})

    def first_added(
        self, kind: str, skip: str = "", count: int = 1, timeout_s: float = VERDICT_TIMEOUT_S
    ) -> str:
        """Block until ``count`` objects of ``kind`` of this benchmark are first seen (secret,
        configmap, job: created; report: the merged report created; result: a shard result
        published), by a watch: milliseconds after it happens, where a poll could miss a short
        window. Names starting with ``skip`` (an earlier generation's Job) do not count."""
        listers = {
            "secret": self.core.list_namespaced_secret,
            "configmap": self.core.list_namespaced_config_map,
            "report": self.core.list_namespaced_config_map,
            "result": self.core.list_namespaced_config_map,
            "job": self.batch.list_namespaced_job,
        }
        selector = {"field_selector": f"metadata.name={report_name(self.name)}"}
        if kind != "report":
            selector = {"label_selector": f"{UID_LABEL}={self.uid}"}
        stream = kwatch.Watch().stream(
            listers[kind], self.namespace, timeout_seconds=int(timeout_s), **selector
        )
        seen: list[str] = []
        for event in stream:
            obj = event["object"]
            name = str(obj.metadata.name)
            if skip and name.startswith(skip):
                continue
            if kind == "result":
                if "-shard-" not in name or not obj.data or event["type"] == "DELETED":
                    continue
            elif event["type"] != "ADDED":
                continue
            if name not in seen:
                seen.append(name)
            if len(seen) == count:
                stream.close()
                return ", ".join(seen)
        raise AssertionError(f"no {kind} of {self.name} appeared within {timeout_s:.0f}s: {seen}")


@dataclass(frozen=True)
class Point:
    """Where to kill: once ``when`` holds (polled), or the first ``added`` object appears
    (watched), after ``after_s`` more seconds."""

    name: str
    when: Callable[[BenchView], bool] | None = None
    after_s: float = 0.0
    added: str = ""
    count: int = 1  # with added: how many
    spec_change: bool = False  # first let generation 1 finish, change the spec, then count from there


def _always(_: BenchView) -> bool:
    return True


def _pods_running(view: BenchView) -> bool:
    return sorted(view.pods.values()) == ["Running"] * SHARDS


BENCH_POINTS = [
    Point("applied", _always),
    Point("applied+0.1s", _always, 0.1),
    Point("applied+0.3s", _always, 0.3),
    Point("key-secret-created", added="secret"),
    Point("result-objects-created", added="configmap"),
    Point("job-created", added="job"),
    Point("status-running", lambda v: v.status.get("phase") == "Running"),
    Point("shard-pods-running", _pods_running),
    Point("shards-mid-run", _pods_running, 1.5),
    Point("first-result-published", added="result"),
    Point("all-results-published", added="result", count=SHARDS),
    Point("job-complete", lambda v: v.job_complete),
    Point("job-complete+0.7s", lambda v: v.job_complete, 0.7),
    Point("job-complete+1.4s", lambda v: v.job_complete, 1.4),
    Point("report-written", added="report"),
    Point("ready", lambda v: v.ready == "True"),
    Point("spec-changed", _always, spec_change=True),
    Point("spec-changed+0.3s", _always, 0.3, spec_change=True),
    Point("new-job-created", added="job", spec_change=True),
    Point("new-job-results-published", added="result", count=SHARDS, spec_change=True),
]
DEFAULT_BENCH_POINTS = {"job-created", "report-written"}


def _bench_spec(url: str, duration_s: float = 2.0) -> dict[str, Any]:
    return {
        "target": {"url": url, "backend": "http", "path": "/health"},
        "load": {"concurrency": [2], "durationSeconds": duration_s},
        "shards": SHARDS,
        "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
    }


def _poll_until(
    watch: BenchWatch, check: Callable[[BenchView], bool], what: str, timeout_s: float = VERDICT_TIMEOUT_S
) -> BenchView:
    deadline = time.monotonic() + timeout_s
    while True:
        view = watch.view()
        if check(view):
            return view
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {view.describe()}"
        time.sleep(POLL_S)


def _bench_params() -> list[Any]:
    return [
        pytest.param(p, id=p.name, marks=() if p.name in DEFAULT_BENCH_POINTS else (pytest.mark.long,))
        for p in BENCH_POINTS
    ]


@pytest.fixture
def recorder(kube: Any) -> Iterator[Recorder]:
    watcher = Recorder(kube.kubeconfig, kube.namespace)
    try:
        yield watcher
    finally:
        watcher.close()


@pytest.mark.parametrize("point", _bench_params())
def test_a_benchmark_survives_a_crash(
    point: Point,
    kube: Any,
    refserver: str,
    operator: Any,
    api: client.ApiClient,
    recorder: Recorder,
    tmp_path: Path,
) -> None:
    name = "crash-bench"
    body = yaml.safe_load(stack.custom_resource("MCPBenchmark", name, _bench_spec(refserver)))
    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "mcpbenchmarks", body
    )
    armed = time.monotonic()
    watch = BenchWatch(api, kube.namespace, name, created["metadata"]["uid"])
    generation, first_job = 1, ""
    if point.spec_change:
        view = _poll_until(watch, lambda v: v.decided(1), "generation 1's verdict")
        assert view.ready == "True", view.describe()
        first_job = view.status["jobName"]
        kube.run(
            "patch", "mcpbenchmark", name, "--type=merge", "-p", '{"spec":{"load":{"durationSeconds":2.5}}}'
        )
        armed, generation = time.monotonic(), 2
    if point.added:
        seen = f"{point.added} {watch.first_added(point.added, skip=first_job, count=point.count)}"
    elif point.when is _always:
        seen = "nothing looked at"
    else:
        assert point.when is not None
        seen = _poll_until(watch, point.when, point.name).describe()
    time.sleep(point.after_s)
    killed_after = time.monotonic() - armed
    restarted, start_s = crash_and_restart(operator, kube.kubeconfig, tmp_path)
    left = watch.view().describe()  # what the dead operator left (only the Job moves on)

    def state() -> str:
        now = watch.view().describe()
        return f"seen: {seen}\nleft: {left}\nnow: {now}\nlog: {operator.process.log_tail(3000)}"

    view = _poll_until(watch, lambda v: v.decided(generation), f"generation {generation}'s verdict")
    to_verdict = time.monotonic() - restarted
    print(
        f"\n[crash point {point.name}] killed {killed_after:.2f}s after "
        f"{'the spec change' if point.spec_change else 'apply'} (seen: {seen}; left: {left}); new operator "
        "live in "
        f"{start_s:.2f}s, verdict {to_verdict:.2f}s after its start (log: {operator.process.log_path})"
    )
    status = view.status
    assert status["phase"] == "Succeeded" and status["verdict"] == "Pass", state()
    assert view.ready == "True", state()
    job = status["jobName"]

    # exactly one Job per generation, ever (the recorder saw every one created); only the
    # current one is left once a superseded one is gone
    expected_jobs = [first_job, job] if point.spec_change else [job]
    assert recorder.jobs == expected_jobs and len(set(expected_jobs)) == generation, (recorder.jobs, state())
    deadline = time.monotonic() + 60
    while list(watch.view().jobs) != [job]:
        assert time.monotonic() < deadline, (list(watch.view().jobs), state())
        time.sleep(0.2)
    job_obj = view.jobs[job]
    assert job_obj["spec"]["completions"] == SHARDS and job_obj["status"].get("succeeded") == SHARDS

    # every shard pod ran once; exactly one result object per shard, all merged, none rejected
    assert len(recorder.pods.get(job, set())) == SHARDS, (recorder.pods, state())
    results = sorted(n for n in view.maps if n.startswith(f"{job}-shard-"))
    assert results == [f"{job}-shard-{i}" for i in range(SHARDS)], results
    assert status["shards"] == {
        "expected": SHARDS,
        "reported": SHARDS,
        "rejected": 0,
        "succeeded": SHARDS,
        "failed": 0,
    }, state()
    report = client.CoreV1Api(api).read_namespaced_config_map(status["reportName"], kube.namespace)
    merged = loads_document(report.data["result.json"])  # raises on a bad checksum
    assert merged.shards == SHARDS
    assert [level.completed for level in merged.levels] == [row["requests"] for row in status["results"]]

    events = kube.events(name)
    created_events = [e for e in events if e["reason"] == "JobCreated" and job in e.get("message", "")]
    assert sum(e.get("count", 1) for e in created_events) <= 1, created_events
    assert not [e for e in events if e["reason"] == "ShardResultRejected"], events
    verdicts = {e["reason"] for e in events if e["reason"] in VERDICT_REASONS}
    assert verdicts <= {_ready(view.obj)["reason"]}, verdicts  # a replay may repeat a verdict, not change it


# -- MCPReadiness drill with a fault ---------------------------------------------------------------


def _drill_gate(name: str, url: str) -> str:
    fault = {"kind": "scaleDown", "workload": "srv", "replicas": 1, "atSeconds": 0.5}
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 100, "minSuccessRatio": 0.99, "maxProberLagMs": 250}},
        "drill": {
            "kpis": {"healthSuccessRatio": 0.98},
            "stages": [
                {"name": "faulted", "load": {"rate": 20, "durationSeconds": 3.5}, "faults": [fault]},
                {"name": "after", "load": {"rate": 20, "durationSeconds": 2.5}},
            ],
        },
    }
    return stack.custom_resource("MCPReadiness", name, spec)


@dataclass
class DrillView:
    obj: dict[str, Any]
    replicas: int

    @property
    def status(self) -> dict[str, Any]:
        return self.obj.get("status") or {}

    @property
    def faults(self) -> list[dict[str, Any]]:
        return list(self.status.get("faults") or [])

    def fault_in(self, *phases: str) -> bool:
        return any(f["phase"] in phases for f in self.faults)

    def describe(self) -> str:
        ready = _ready(self.obj)
        return (
            f"phase={self.status.get('phase')} stage={self.status.get('stage')} "
            f"faults={[f['phase'] for f in self.faults]} replicas={self.replicas} "
            f"ready={ready.get('status')}/{ready.get('reason')}"
        )


@dataclass(frozen=True)
class DrillPoint:
    name: str
    when: Callable[[DrillView], bool]
    after_s: float = 0.0
    watched: bool = False  # judge each version of the object a watch delivers (replicas unknown)


DRILL_POINTS = [
    DrillPoint("applied", lambda v: True),
    DrillPoint("claimed", lambda v: v.status.get("phase") == "Running"),
    DrillPoint("fault-planned", lambda v: bool(v.faults), watched=True),
    # watched: a 20 ms poll of the object and the Deployment once missed the whole Injected window
    # (the journal says Injected only after the scale-down, so the replicas need no second read)
    DrillPoint("fault-injected", lambda v: v.fault_in("Injected"), watched=True),
    DrillPoint("fault-held-mid-stage", lambda v: v.fault_in("Injected"), 1.5),
    DrillPoint("fault-reverted-next-stage", lambda v: v.fault_in("Reverted")),
    DrillPoint("verdict-written", lambda v: _ready(v.obj).get("status") in ("True", "False")),
]
DEFAULT_DRILL_POINTS = {"fault-injected"}


@dataclass
class DrillWatch:
    api: client.ApiClient
    namespace: str
    name: str
    replicas_seen: list[int] = field(default_factory=list)

    def view(self) -> DrillView:
        obj = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "mcpreadinesses", self.name
        )
        deployment = client.AppsV1Api(self.api).read_namespaced_deployment("srv", self.namespace)
        self.replicas_seen.append(int(deployment.spec.replicas))
        return DrillView(obj, int(deployment.spec.replicas))


def _drill_params() -> list[Any]:
    return [
        pytest.param(p, id=p.name, marks=() if p.name in DEFAULT_DRILL_POINTS else (pytest.mark.long,))
        for p in DRILL_POINTS
    ]


def _crash_a_drill(
    point: DrillPoint, kube: Any, refserver: str, operator: Any, api: client.ApiClient, tmp_path: Path
) -> tuple[DrillWatch, DrillView, Callable[[], str]]:
    """Run the drill, SIGKILL the operator at ``point``, start a new one and wait until the drill
    has a verdict with nothing left open; returns the view then and a describer for failures."""
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    kube.apply(stack.kwok_deployment())
    apps = client.AppsV1Api(api)
    deadline = time.monotonic() + 90
    while int(apps.read_namespaced_deployment("srv", kube.namespace).status.ready_replicas or 0) != 3:
        assert time.monotonic() < deadline, "srv never ready"
        time.sleep(0.3)
    watch = DrillWatch(api, kube.namespace, "crash-drill")
    kube.apply(_drill_gate(watch.name, refserver))
    armed = time.monotonic()
    held_at: float | None = None
    if point.watched:  # every version of the object, milliseconds after it is written
        stream = kwatch.Watch().stream(
            client.CustomObjectsApi(api).list_namespaced_custom_object,
            GROUP,
            VERSION,
            kube.namespace,
            "mcpreadinesses",
            field_selector=f"metadata.name={watch.name}",
            timeout_seconds=120,
        )
        for event in stream:
            view = DrillView(event["object"], -1)
            if point.when(view):
                stream.close()
                break
        else:
            raise AssertionError(f"{point.name} never came")
        time.sleep(point.after_s)
    while not point.watched:
        view = watch.view()
        now = time.monotonic()
        if held_at is None and point.when(view):
            held_at = now
        if held_at is not None and now >= held_at + point.after_s:
            break
        assert now - armed < 120, f"{point.name} never came: {view.describe()}"
        time.sleep(POLL_S)
    seen, killed_after = view.describe(), time.monotonic() - armed
    restarted, start_s = crash_and_restart(operator, kube.kubeconfig, tmp_path)

    def state() -> str:
        return f"seen: {seen}\nnow: {watch.view().describe()}\nlog: {operator.process.log_tail(3000)}"

    reverted_in: float | None = None
    deadline = time.monotonic() + VERDICT_TIMEOUT_S
    while True:
        view = watch.view()
        if reverted_in is None and view.replicas == 3:
            reverted_in = time.monotonic() - restarted
        final = view.status.get("phase") in (*DECIDED_PHASES, "Aborted") and _ready(view.obj).get(
            "status"
        ) in ("True", "False")
        if final and view.replicas == 3 and not view.fault_in("Planned", "Injected"):
            break
        assert time.monotonic() < deadline, f"no verdict with every fault reverted: {state()}"
        time.sleep(0.1)
    print(
        f"\n[crash point drill {point.name}] killed {killed_after:.2f}s after apply (seen: {seen}); new "
        f"operator live in {start_s:.2f}s, replicas restored {reverted_in or 0:.2f}s and verdict "
        f"{time.monotonic() - restarted:.2f}s after its start: {view.describe()}"
    )
    return watch, view, state


@pytest.mark.parametrize("point", _drill_params())
def test_a_drill_survives_a_crash_and_every_fault_is_reverted(
    point: DrillPoint, kube: Any, refserver: str, operator: Any, api: client.ApiClient, tmp_path: Path
) -> None:
    watch, view, state = _crash_a_drill(point, kube, refserver, operator, api, tmp_path)
    status, ready = view.status, _ready(view.obj)
    faults = view.faults
    assert len(faults) <= 1 and len({f["id"] for f in faults}) == len(faults), faults
    assert all(f["phase"] in ("Reverted", "Skipped") for f in faults), faults
    # every ended drill says its faults are reverted, however it ended
    assert stack.condition_of(view.obj, "FaultsReverted").get("status") == "True", state()
    # a drill the operator lost is never a pass; one that ran whole is Inconclusive on its fault
    # (a scaleDown of a kwok Deployment that does not serve the target: no outage, so no
    # recovery measured), unless the target failed meanwhile (a busy host) and its recovery passed
    assert status["verdict"] in ("Pass", "Warn", "Inconclusive"), state()
    if ready["reason"] == "DrillInterrupted":
        assert status["verdict"] == "Inconclusive", state()
    elif status["verdict"] == "Inconclusive":
        assert ready["reason"] == "NoOutageObserved" and [f["phase"] for f in faults] == ["Reverted"], state()
    else:
        assert ready["status"] == "True" and [f["phase"] for f in faults] == ["Reverted"], state()
    time.sleep(2)  # nothing injects the fault again
    assert watch.view().replicas == 3
    # and the object goes when deleted: no finalizer left behind by the dead operator
    deleted = kube.run("delete", "mcpreadiness", watch.name, "--wait=true", "--timeout=60s", check=False)
    assert deleted.returncode == 0, (deleted.stderr, state())
    assert int(client.AppsV1Api(api).read_namespaced_deployment("srv", kube.namespace).spec.replicas) == 3


@pytest.mark.long
def test_an_interrupted_drill_says_its_faults_are_reverted(
    kube: Any, refserver: str, operator: Any, api: client.ApiClient, tmp_path: Path
) -> None:
    point = next(p for p in DRILL_POINTS if p.name == "fault-reverted-next-stage")
    _, view, state = _crash_a_drill(point, kube, refserver, operator, api, tmp_path)
    assert [f["phase"] for f in view.faults] == ["Reverted"], state()
    assert stack.condition_of(view.obj, "FaultsReverted").get("status") == "True", state()
