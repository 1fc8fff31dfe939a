"""Everything around the control plane that the demo and the e2e tests both start: CRDs, the
operator as a real process, the reference inference server, and a kubectl of the same
version as the API server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from . import build
from .cluster import ClusterState, DevCluster
from .processes import ManagedProcess, free_port, http_ok, stop_pid, wait_until

SAMPLE_URL = "http://127.0.0.1:18080"
FIRST_LINE_PORT = re.compile(r"^(\d+)\s*$", re.MULTILINE)


def kubectl_path() -> Path:
    return build.binary("kubernetes", "kubectl")


def kubectl(
    kubeconfig: Path, *args: str, input_text: str | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run our kubectl; with ``check`` a failure raises with kubectl's own message."""
    result = subprocess.run(
        [str(kubectl_path()), f"--kubeconfig={kubeconfig}", *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def apply_crds(kubeconfig: Path, crd_dir: Path) -> None:
    kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", str(crd_dir))
    kubectl(
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "crd",
        "-l",
        "app.kubernetes.io/part-of=mcp-operator",
        "--timeout=60s",
    )


def start_refserver(log_dir: Path, *extra: str) -> tuple[ManagedProcess, str]:
    """The reference server on a free loopback port; returns the process and its base URL."""
    log = log_dir / f"refserver-{time.monotonic_ns()}.log"
    proc = ManagedProcess("refserver", [sys.executable, "-m", "mcp_refserver", "--port", "0", *extra], log)
    proc.start()
    found: list[int] = []

    def bound() -> bool:
        match = FIRST_LINE_PORT.search(proc.log_tail(200_000))
        if match:
            found.append(int(match.group(1)))
        return bool(found) and http_ok(f"http://127.0.0.1:{found[0]}/health")

    wait_until(proc, bound, timeout_s=30, what="serving")
    return proc, f"http://127.0.0.1:{found[0]}"


# the identity in the leader Lease: the same for every start, like the restarted container of one
# pod, so a successor of a killed operator leads at once instead of after the lease duration
OPERATOR_IDENTITY = "devcluster-operator"


@dataclass
class OperatorProcess:
    process: ManagedProcess
    liveness_url: str
    metrics_url: str
    identity: str = OPERATOR_IDENTITY

    def health(self) -> dict[str, Any]:
        """The liveness endpoint's answer: ``{"leader": identity, ...}`` from the leader (kopf's
        probes), ``{"standby": identity, "leader": holder}`` on standby; {} when it is silent."""
        return liveness_body(self.liveness_url)

    def leading(self) -> bool:
        health = self.health()
        return "standby" not in health and health.get("leader") == self.identity

    def log_records(self, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """The operator's JSON log lines so far, parsed (a line that is not JSON is passed over);
        with ``namespace``, only those about an object of that namespace."""
        for line in self.process.log_path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and (namespace is None or record.get("namespace") == namespace):
                yield record


# the operator as the e2e tests run it: besides its own per-run account, shards may run under a
# namespace's "default" account (one test shows a user's own account working) or a "bench-*" one
# (the preflight test names one that does not exist), and nothing else
TEST_OPERATOR_ENV = {
    "MCP_RUNNER_SERVICE_ACCOUNT_ALLOW": "default,bench-*",
    "MCP_METRICS_ADDRESS": "127.0.0.1",
}
# what the operator's image sets for every process in it (Dockerfile): Python with -OO, so that a
# local operator holds what the one in a pod holds
IMAGE_PYTHON_ENV = {"PYTHONOPTIMIZE": "2"}
_STARTED: dict[tuple[str, str], ManagedProcess] = {}  # (kubeconfig, identity) -> the last one started


def liveness_body(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            body: dict[str, Any] = json.loads(resp.read())
            return body
    except (OSError, ValueError):
        return {}


def start_operator(
    kubeconfig: Path,
    log_dir: Path,
    *,
    namespaces: list[str] | None = None,
    identity: str = OPERATOR_IDENTITY,
    lead: bool = True,
    env: dict[str, str] | None = None,
    timeout_s: float = 60,
) -> OperatorProcess:
    """``mcp-operator run`` as its own process; returns once it leads (holds the Lease and runs
    its handlers), or with ``lead=False`` once it is live (possibly on standby). One that does
    neither within ``timeout_s`` is stopped before the error is raised: the caller never got it
    to stop, and it would outlive its cluster.

    Two live processes must never share an identity on one cluster (both would lead): refused."""
    key = (str(kubeconfig), identity)
    previous = _STARTED.get(key)
    if previous is not None and previous.exited() is None:
        raise RuntimeError(f"an operator with identity {identity!r} still runs: {previous.argv}")
    liveness_port, metrics_port = free_port(), free_port()
    argv = [
        sys.executable,
        "-m",
        "mcp_operator.cli",
        "run",
        "--liveness",
        f"http://127.0.0.1:{liveness_port}/healthz",
        "--identity",
        identity,
    ]
    for ns in namespaces or []:
        argv += ["--namespace", ns]
    full_env = {
        **IMAGE_PYTHON_ENV,
        **TEST_OPERATOR_ENV,
        **os.environ,
        **(env or {}),
        "KUBECONFIG": str(kubeconfig),
        "MCP_METRICS_PORT": str(metrics_port),
    }
    proc = ManagedProcess("operator", argv, log_dir / f"operator-{time.monotonic_ns()}.log", env=full_env)
    proc.start()
    _STARTED[key] = proc
    liveness = f"http://127.0.0.1:{liveness_port}/healthz"
    op = OperatorProcess(proc, liveness, f"http://127.0.0.1:{metrics_port}/metrics", identity)
    try:
        if lead:
            wait_until(proc, op.leading, timeout_s=timeout_s, what="leading")
        else:
            wait_until(proc, lambda: http_ok(liveness), timeout_s=timeout_s, what="live")
    except BaseException:
        stop(proc)
        raise
    return op


@contextmanager
def own_cluster(work: Path, crd_dir: Path, **options: Any) -> Iterator[ClusterState]:
    """A control plane of a test module's own (``DevCluster`` options: three etcd members, the
    node-lifecycle controller, ...) with the CRDs applied, taken down whatever happened."""
    dev = DevCluster(work, **options)
    try:
        state = dev.up()
        apply_crds(Path(state.kubeconfig), crd_dir)
        yield state
    finally:
        dev.down()


@dataclass(frozen=True)
class OperatedCluster:
    """A dev cluster with the CRDs applied, the operator leading and a reference server."""

    kubeconfig: Path
    refserver_url: str
    operator: OperatorProcess


@contextmanager
def operated_cluster(work: Path, crd_dir: Path, *refserver_args: str) -> Iterator[OperatedCluster]:
    """Brings a dev cluster up under ``work`` with everything a measurement of the operator
    needs, and takes it all down again, whatever happened."""
    cluster = DevCluster(work / "cluster")
    state = cluster.up()
    refserver = operator = None
    try:
        kubeconfig = Path(state.kubeconfig)
        apply_crds(kubeconfig, crd_dir)
        refserver, url = start_refserver(work, *refserver_args)
        operator = start_operator(kubeconfig, work)
        yield OperatedCluster(kubeconfig, url, operator)
    finally:
        stop(operator.process if operator else None)
        stop(refserver)
        cluster.down()


def stop(proc: ManagedProcess | None) -> None:
    if proc is not None and proc.popen is not None:
        stop_pid(proc.popen.pid)


def render_sample(text: str, target_url: str) -> str:
    """Point a sample at the running reference server instead of its documented default port."""
    return text.replace(SAMPLE_URL, target_url)


def custom_resource(kind: str, name: str, spec: dict[str, Any]) -> str:
    """YAML of one of our resources, for ``kubectl apply``."""
    return yaml.safe_dump(
        {"apiVersion": "mcp2026.io/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    )


def deployment_body(
    name: str,
    pod_spec: dict[str, Any],
    replicas: int = 2,
    template_meta: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Deployment of pods labelled ``app: name`` (its selector); ``spec`` adds fields (a
    ``strategy``), ``template_meta`` to the pod template's metadata (annotations)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            **spec,
            "template": {"metadata": {"labels": {"app": name}, **(template_meta or {})}, "spec": pod_spec},
        },
    }


def service_body(name: str, port: int, **spec: Any) -> dict[str, Any]:
    """A Service of the pods labelled ``app: name``, ``port`` to their port named ``http``."""
    ports = [{"name": "http", "port": port, "targetPort": "http"}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": ports, **spec},
    }


def kwok_deployment_body(
    name: str = "srv", replicas: int = 3, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Deployment whose pods kwok simulates (on the nodes labelled ``type: kwok``): a workload
    that drills scale, kill and restart without running anything."""
    pod_spec = {
        "nodeSelector": {"type": "kwok"},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.example/srv:1"}],
    }
    return deployment_body(name, pod_spec, replicas, {"annotations": annotations} if annotations else None)


def refserver_container(*args: str, image: str = "unused") -> dict[str, Any]:
    """A container that runs the reference server on the pod's IP, port 8000 (``http``), with
    ``args`` added and a readiness probe on /health: the local kubelet runs its command (the
    image is not used)."""
    return {
        "name": "server",
        "image": image,
        "command": ["python", "-m", "mcp_refserver"],
        "args": ["--host", "$(POD_IP)", "--port", "8000", *args],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": 8000}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1},
    }


def kwok_deployment(name: str = "srv", replicas: int = 3) -> str:
    """``kwok_deployment_body`` as JSON, for ``kubectl apply``."""
    return json.dumps(kwok_deployment_body(name, replicas))


def api_requests(kubeconfig: Path, resource: str) -> Counter[tuple[str, str]]:
    """The API server's ``apiserver_request_total`` for ``resource``, by (verb, code), every
    client together (WATCH included)."""
    text = kubectl(kubeconfig, "get", "--raw", "/metrics").stdout
    counts: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels.get("resource") == resource:
                counts[sample.labels["verb"], sample.labels.get("code", "")] += int(sample.value)
    return counts


def until(
    check: Callable[[], Any],
    what: str,
    timeout_s: float = 90,
    state: Callable[[], object] = str,
    interval_s: float = 0.3,
) -> Any:
    """Poll ``check`` until it returns something truthy and return that; on time-out fail with
    ``what`` and whatever ``state`` says of the moment."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting until {what}\n{state()}"
        time.sleep(interval_s)


def passed_or_flagged_apart(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert a finished benchmark passed, or was flagged ShardsNotConcurrent (Inconclusive, with
    the levels it did not merge as one marked ``clusterWide: false``); return those rows (empty
    on a Pass). Within bounds, or flagged: on a busy host one shard can begin a level late, and
    the operator then says the level is no cluster-wide figure instead of passing it."""
    status = obj.get("status") or {}
    ready = condition_of(obj)
    if ready.get("status") == "True":
        assert status.get("verdict") == "Pass", (ready, status.get("results"))
        return []
    assert ready.get("reason") == "ShardsNotConcurrent" and status.get("verdict") == "Inconclusive", ready
    apart = [row for row in status.get("results") or [] if row.get("clusterWide") is False]
    assert apart, status.get("results")
    print(f"\nflagged, not merged as one: {ready.get('message')}")
    return apart


# the Ready reasons of a benchmark that reached its verdict (the e2e tests count verdict events)
BENCHMARK_VERDICT_REASONS = frozenset(
    {"Measured", "SloMet", "SloMissed", "ShardResultMissing", "ShardFailed", "NothingMeasured", "JobMissing"}
)


def condition_of(obj: dict[str, Any], type_: str = "Ready") -> dict[str, Any]:
    """One condition of an object as read back from the API (KeyError-free: {} when absent)."""
    conditions: list[dict[str, Any]] = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), {})
