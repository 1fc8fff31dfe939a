"""The convergence checks through the real operator: MCPReadiness objects with xdsSync,
configConsistency and metricDrift, applied with kubectl, whose rows land in status.checks[] and
whose verdict lands in the Ready condition.

Real pieces: the operator as its own process against the real control plane; the xDS testbed
(a go-control-plane control plane and grpc-go xDS clients, ``mcp_devcluster.xdsbed``); a
Deployment whose pods the local kubelet runs; Debian's Prometheus scraping a live exporter (the
fixtures of e2e/test_checks_drift.py). Argo CD does not run here: the Application CRD is the
fixture of e2e/test_checks_config.py, and the Application named below does not exist.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from e2e.test_checks_config import (  # noqa: F401  (argocd_crd is a fixture)
    SECRET_VALUE,
    Namespace,
    argocd_crd,
    config_objects,
    deployment,
    rolled_out,
)
from e2e.test_checks_drift import PROMETHEUS, exporter, prometheus, prometheus_dir  # noqa: F401  (fixtures)

from mcp_checks.config import short
from mcp_checks.suite import CheckContext, plan_checks, run_checks
from mcp_checks.verdict import Verdict
from mcp_checks.xds import XdsSource, XdsSyncSpec, measure_convergence
from mcp_devcluster import stack
from mcp_devcluster.processes import free_port
from mcp_devcluster.xdsbed import XdsBed
from mcp_operator.api.readiness import DECIDED_PHASES

NODES = ["node-a", "node-b", "node-c"]
NACK_TEXT = "ChoiceCount must be >= 2"  # grpc-go's own validation error for the rejected Cluster
# a probe round against the reference server; the prober-lag bound is relaxed because these
# tests are about the convergence checks, not about how busy this 2-core machine is
PROBE = {
    "path": "/v2/health/ready",
    "requests": 1000,
    "concurrency": 8,
    "timeoutMs": 1000,
    "minSuccessRatio": 0.99,
    "maxP99Ms": 250,
    "maxProberLagMs": 250,
}
CONFIG = {"workload": {"name": "web"}, "configMaps": ["web-config"], "secrets": ["web-secret"]}
SKEWED_RAW = "sum by (job, route) (requests_total)"  # what job:requests:skewed should record
DRIFT = {
    "rules": [
        {"record": "job:requests:rate_sum", "expr": SKEWED_RAW},  # correct (the same expression)
        {"record": "job:requests:skewed", "expr": SKEWED_RAW},  # records 1% too much
    ],
}
SLOW_REQUEST_S = 1.0
PROBES = 4  # sequential requests of the slow probe round
needs_prometheus = pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="no prometheus binary")


def gate(name: str, url: str, probe: dict[str, Any] | None = None, **checks: Any) -> str:
    spec = {"target": {"url": url}, "checks": {"healthProbe": probe or PROBE, **checks}}
    return stack.custom_resource("MCPReadiness", name, spec)


def evaluated(kube: Any, name: str, generation: int, timeout_s: float = 120) -> dict[str, Any]:
    """The object once the operator wrote the verdict of ``generation``."""
    deadline = time.monotonic() + timeout_s
    while True:
        obj: dict[str, Any] = kube.get("mcpreadiness", name)
        status = obj.get("status") or {}
        if status.get("observedGeneration") == generation and status.get("phase") in (
            *DECIDED_PHASES,
            "Invalid",
        ):
            assert status["phase"] != "Invalid", status
            return obj
        assert time.monotonic() < deadline, f"{name} generation {generation} not evaluated: {status}"
        time.sleep(0.5)


def row(obj: dict[str, Any], check: str) -> dict[str, Any]:
    rows = {r["name"]: r for r in obj["status"]["checks"]}
    assert check in rows, list(rows)
    return rows[check]


def seconds(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[XdsBed]:
    with XdsBed(tmp_path / "xds", list(NODES)) as testbed:
        yield testbed


@pytest.fixture
def workload(kube: Any, kubeconfig: Path) -> Iterator[Namespace]:
    """web-config, web-secret and a Deployment ``web`` whose template carries their hash,
    rolled out: two Ready pods that the local kubelet runs, in the test's namespace."""
    ns = Namespace(kubeconfig, kube.namespace)
    try:
        config_objects(ns, "v1")
        ns.apply(deployment(ns.config_hash("web-config", "web-secret")))
        rolled_out(ns)
        yield ns
    finally:
        ns.api.close()


@pytest.fixture
def blackhole() -> Iterator[str]:
    """host:port that accepts TCP connections and never answers: a CSDS source that hangs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def slow_target() -> Iterator[str]:
    """A real HTTP server whose every answer takes SLOW_REQUEST_S: a probe round of known length."""

    class Slow(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            time.sleep(SLOW_REQUEST_S)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- a. xDS sync ----------------------------------------------------------------------------


def xds_spec(bed: XdsBed, version: str) -> XdsSyncSpec:
    return XdsSyncSpec(
        sources=(XdsSource("csds", bed.control_plane_csds),),
        expected_proxies=tuple(NODES),
        expected_version=version,
        timeout_s=3,
    )


def test_xds_sync_gate_is_ready_when_synced_and_not_ready_on_a_nack(
    kube: Any, refserver: str, bed: XdsBed
) -> None:
    first = asyncio.run(measure_convergence(xds_spec(bed, "v1"), timeout_s=30))
    assert first.seconds is not None, first.outcome.message
    source = f"csds:{bed.control_plane_csds}"
    xds = {
        "sources": [{"kind": "csds", "address": bed.control_plane_csds}],
        "proxies": {"ids": NODES},
        "expectedVersion": "v1",
        "timeoutSeconds": 5,
    }
    kube.apply(gate("xds", refserver, xdsSync=xds))
    obj = evaluated(kube, "xds", 1)
    ready = stack.condition_of(obj)
    assert (ready["status"], ready["reason"]) == ("True", "ChecksPassed"), obj["status"]
    assert (obj["status"]["verdict"], obj["status"]["score"]) == ("Pass", 100)
    synced = row(obj, "xds-sync")
    assert (synced["verdict"], synced["reason"]) == ("Pass", "ProxiesSynced"), synced
    assert synced["observed"]["proxiesReported"] == "3"
    assert synced["observed"]["synced"] == str(len(NODES) * 4)  # LDS, RDS, CDS, EDS each
    assert synced["observed"]["proxy/node-b"] == "LDS=synced RDS=synced CDS=synced EDS=synced"
    assert synced["source"] == source

    # a snapshot node-b's grpc-go client refuses; once the control plane has seen the NACK,
    # the gate is changed to expect the new version (a new generation is evaluated once)
    bed.set_snapshot("v2", reject=("node-b",))
    nack = asyncio.run(measure_convergence(xds_spec(bed, "v2"), timeout_s=30))
    assert nack.seconds is None and nack.outcome.reason == "ProxyNacked", nack.outcome.message
    kube.apply(gate("xds", refserver, xdsSync={**xds, "expectedVersion": "v2"}))
    obj = evaluated(kube, "xds", 2)
    ready = stack.condition_of(obj)
    assert (ready["status"], ready["reason"]) == ("False", "ProxyNacked"), obj["status"]
    assert NACK_TEXT in ready["message"] and "node-b/CDS" in ready["message"]
    assert obj["status"]["verdict"] == "Fail" and obj["status"]["phase"] == "Failed"
    failed = row(obj, "xds-sync")
    assert (failed["verdict"], failed["reason"]) == ("Fail", "ProxyNacked"), failed
    assert NACK_TEXT in failed["message"]
    nacked = [f for f in failed["findings"] if f["reason"] == "ProxyNacked"]
    assert [f["subject"] for f in nacked] == ["node-b/CDS"], failed["findings"]
    assert nacked[0]["verdict"] == "Fail" and nacked[0]["threshold"] == "ACKED"
    assert nacked[0]["source"] == source and NACK_TEXT in nacked[0]["observed"]
    assert "NACKed version v2" in nacked[0]["observed"]
    assert row(obj, "health-probe")["verdict"] == "Pass"  # the worst check decides, not the first
    warnings = [e for e in kube.events("xds") if e["reason"] == "ProxyNacked"]
    assert warnings and NACK_TEXT in warnings[-1]["message"]


def _pods(ns: Namespace) -> dict[str, dict[str, Any]]:
    listed = json.loads(ns.kubectl("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]
    return {p["metadata"]["name"]: p for p in listed}


def test_xds_gate_expects_the_workloads_ready_pods_and_fails_when_one_goes_with_its_proxy(
    kube: Any, refserver: str, workload: Namespace, tmp_path: Path
) -> None:
    """The workload's ready pods say who should be there, not the control plane's answer: each
    pod's proxy (node ID ``{pod}.{namespace}``) is a grpc-go client of the bed. A pod deleted with
    its proxy is replaced by a pod whose proxy never connects: the standing gate fails within a
    round (ProxyMissing, naming the new pod). A gate with only minProxies keeps what it saw in
    status; and a source with no proxy at all is never Ready."""
    ns = workload.name
    nodes = [f"{pod}.{ns}" for pod in sorted(_pods(workload))]
    assert len(nodes) == 2
    with XdsBed(tmp_path / "xds-pods", nodes) as pods_bed:
        source = [{"kind": "csds", "address": pods_bed.control_plane_csds}]
        selected = {"sources": source, "proxies": {"matchLabels": {"app": "web"}}, "timeoutSeconds": 5}
        standing = {
            "target": {"url": refserver},
            "checks": {"healthProbe": PROBE, "xdsSync": selected},
            "recheckIntervalSeconds": 10,
        }
        kube.apply(stack.custom_resource("MCPReadiness", "xds-pods", standing))
        kube.apply(gate("xds-count", refserver, xdsSync={"sources": source, "minProxies": 2}))
        kube.apply(gate("xds-unvouched", refserver, xdsSync={"sources": source}))
        synced = row(evaluated(kube, "xds-pods", 1), "xds-sync")
        assert (synced["verdict"], synced["observed"]["proxiesExpected"]) == ("Pass", "2"), synced
        counted = evaluated(kube, "xds-count", 1)
        assert row(counted, "xds-sync")["verdict"] == "Pass"
        seen = {p["nodeId"] for p in counted["status"]["xdsMemory"]["proxiesSeen"]}
        assert seen == set(nodes), counted["status"]["xdsMemory"]
        unvouched = row(evaluated(kube, "xds-unvouched", 1), "xds-sync")
        assert (unvouched["verdict"], unvouched["reason"]) == ("Inconclusive", "NoExpectedProxies"), unvouched

        victim = sorted(_pods(workload))[0]
        workload.kubectl("delete", "pod", victim, "--wait=false")
        pods_bed.stop_client(f"{victim}.{ns}")
        deleted_at = time.monotonic()

        def failed() -> dict[str, Any] | None:
            obj: dict[str, Any] = kube.get("mcpreadiness", "xds-pods")
            rows = {r["name"]: r for r in obj["status"].get("checks", [])}
            xds = rows.get("xds-sync") or {}
            return xds if xds.get("verdict") == "Fail" else None

        fail = stack.until(failed, "the gate to fail the missing proxy", timeout_s=90)
        assert fail["reason"] == "ProxyMissing", fail
        replacement = set(_pods(workload)) - {victim} - {n.split(".")[0] for n in nodes}
        missing = {f["subject"] for f in fail["findings"] if f["reason"] == "ProxyMissing"}
        assert missing and missing <= {f"{pod}.{ns}" for pod in replacement}, (missing, replacement)
        # the replacement is Ready a few seconds after the delete; the next round (10 s) judges it
        assert time.monotonic() - deleted_at < 60
        ready = stack.condition_of(kube.get("mcpreadiness", "xds-pods"))
        assert (ready["status"], ready["reason"]) == ("False", "ProxyMissing"), ready

    with XdsBed(tmp_path / "xds-none", []) as empty_bed:
        none = {"sources": [{"kind": "csds", "address": empty_bed.control_plane_csds}], "timeoutSeconds": 5}
        kube.apply(gate("xds-none", refserver, xdsSync=none))
        nothing = row(evaluated(kube, "xds-none", 1), "xds-sync")
        assert (nothing["verdict"], nothing["reason"]) == ("Inconclusive", "NoProxiesReported"), nothing
        assert stack.condition_of(kube.get("mcpreadiness", "xds-none"))["status"] == "False"


# --- b. config consistency ------------------------------------------------------------------


def test_config_consistency_gate_passes_then_fails_on_a_change_not_rolled_out(
    kube: Any, refserver: str, workload: Namespace, operator: Any
) -> None:
    first = workload.config_hash("web-config", "web-secret")
    kube.apply(gate("config", refserver, configConsistency=CONFIG))
    obj = evaluated(kube, "config", 1)
    assert stack.condition_of(obj)["status"] == "True", obj["status"]
    passed = row(obj, "config-consistency")
    assert (passed["verdict"], passed["reason"]) == ("Pass", "ConfigRolledOut"), passed
    assert passed["observed"]["configHash"] == short(first)
    assert passed["observed"]["readyPods"] == "2"
    assert f"Deployment {kube.namespace}/web" in passed["source"]

    # the ConfigMap changes, the Deployment is not rolled out; the gate is re-applied changed
    config_objects(workload, "v2")
    second = workload.config_hash("web-config", "web-secret")
    assert second != first
    kube.apply(gate("config", refserver, configConsistency={**CONFIG, "timeoutSeconds": 20}))
    obj = evaluated(kube, "config", 2)
    ready = stack.condition_of(obj)
    assert (ready["status"], ready["reason"]) == ("False", "TemplateChecksumMismatch"), obj["status"]
    failed = row(obj, "config-consistency")
    assert (failed["verdict"], failed["reason"]) == ("Fail", "TemplateChecksumMismatch"), failed
    assert short(first) in failed["message"] and short(second) in failed["message"]
    assert failed["observed"]["configHash"] == short(second)

    # the Secret's value (and its base64 form) is nowhere: not in the object, not in the events,
    # not in the operator's log; the config hash appears only as its prefix
    shown = kube.run("get", "mcpr", "config", "-o", "yaml").stdout
    events = json.dumps(kube.events("config"))
    log = operator.process.log_path.read_text(errors="replace")
    assert short(second) in shown and short(second) in events
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    for where, text in (("kubectl get -o yaml", shown), ("events", events), ("operator log", log)):
        assert SECRET_VALUE not in text and encoded not in text, where
        assert first not in text and second not in text, where  # full digests stay out too


# --- c. metric drift, and all checks in one gate --------------------------------------------


async def one_at_a_time(
    checks: dict[str, Any], namespace: str, url: str, api: Any
) -> dict[str, tuple[float, Verdict]]:
    """Each check of the gate alone, in this process, through the builder the operator uses."""
    context = CheckContext(namespace, url, api)
    measured = {}
    for planned in plan_checks(checks):
        started = time.monotonic()
        [outcome] = await run_checks([planned], context)
        measured[planned.name] = (time.monotonic() - started, outcome.outcome)
    return measured


@needs_prometheus
def test_metric_drift_gate_fails_with_the_figure(kube: Any, refserver: str, prometheus: str) -> None:  # noqa: F811
    kube.apply(gate("drift", refserver, metricDrift={"prometheusUrl": prometheus, **DRIFT}))
    obj = evaluated(kube, "drift", 1)
    ready = stack.condition_of(obj)
    assert (ready["status"], ready["reason"]) == ("False", "MetricDriftAboveThreshold"), obj["status"]
    drift = row(obj, "metric-drift")
    assert (drift["verdict"], drift["reason"]) == ("Fail", "MetricDriftAboveThreshold"), drift
    assert "drift 1.0000% >= 0.3000%" in drift["message"]
    assert drift["observed"]["job:requests:skewed.maxDrift"] == "1.0000%"
    assert drift["observed"]["job:requests:rate_sum.maxDrift"] == "0.0000%"  # the correct rule
    assert drift["thresholds"]["maxRelativeDrift"] == "< 0.3000%"
    assert drift["source"] == prometheus
    skewed = [f for f in drift["findings"] if f["reason"] == "DriftAboveThreshold"]
    assert len(skewed) == 2 and all("drift=1.0000%" in f["observed"] for f in skewed)
    assert all(f["subject"].startswith("job:requests:skewed") for f in skewed)


@needs_prometheus
def test_all_checks_in_one_gate_run_concurrently(
    kube: Any,
    kubeconfig: Path,
    workload: Namespace,
    prometheus: str,  # noqa: F811
    blackhole: str,
    slow_target: str,
) -> None:
    """Two slow checks: a CSDS source that never answers (timeoutSeconds 3) and a probe round of
    four sequential 1 s requests. One after the other they take 7 s and more; together, about 4."""
    probe = {
        "path": "/health",
        "requests": PROBES,
        "concurrency": 1,
        "timeoutMs": 3000,
        "minSuccessRatio": 0.5,
        "maxP99Ms": 3000,
        "maxProberLagMs": 250,
    }
    checks = {
        "xdsSync": {
            "sources": [{"kind": "csds", "address": blackhole}],
            "proxies": {"ids": NODES},
            "timeoutSeconds": 3,
        },
        "configConsistency": CONFIG,
        "metricDrift": {"prometheusUrl": prometheus, **DRIFT},
    }
    kube.apply(gate("all", slow_target, probe, **checks))
    obj = evaluated(kube, "all", 1)
    status = obj["status"]
    assert [r["name"] for r in status["checks"]] == [
        "health-probe",
        "xds-sync",
        "config-consistency",
        "metric-drift",
    ]
    verdicts = {r["name"]: (r["verdict"], r["reason"]) for r in status["checks"]}
    assert verdicts == {
        "health-probe": ("Pass", "HealthProbePassed"),
        "xds-sync": ("Inconclusive", "SourceUnreachable"),
        "config-consistency": ("Pass", "ConfigRolledOut"),
        "metric-drift": ("Fail", "MetricDriftAboveThreshold"),
    }, status["checks"]
    unreachable = row(obj, "xds-sync")
    assert unreachable["observed"]["sourcesAnswered"] == "0"
    assert [f["subject"] for f in unreachable["findings"]] == [f"csds:{blackhole}"]
    assert unreachable["findings"][0]["verdict"] == "Inconclusive"
    ready = stack.condition_of(obj)
    assert ready["status"] == "False" and status["verdict"] == "Fail" and status["score"] == 50
    assert (
        float(row(obj, "health-probe")["observed"]["round"].removesuffix("ms"))
        >= 1000 * PROBES * SLOW_REQUEST_S
    )

    wall = seconds(status["completedAt"]) - seconds(status["startedAt"])  # to the second
    alone = asyncio.run(one_at_a_time(obj["spec"]["checks"], kube.namespace, slow_target, workload.api))
    total = sum(s for s, _ in alone.values())
    print(
        f"one gate, 4 checks: {wall:.0f} s (startedAt->completedAt); one at a time: {total:.2f} s ("
        + ", ".join(f"{name} {s:.2f} s" for name, (s, _) in alone.items())
        + ")"
    )
    assert {name: v.value for name, (_, v) in alone.items()} == {n: v for n, (v, _) in verdicts.items()}
    assert alone["xds-sync"][0] >= 3 and alone["health-probe"][0] >= PROBES * SLOW_REQUEST_S
    assert wall < total - 1.5, (wall, alone)


# --- d. bad input ---------------------------------------------------------------------------


def test_bad_input_is_inconclusive_and_evaluated_once(
    kube: Any,
    refserver: str,
    workload: Namespace,
    argocd_crd: None,  # noqa: F811
    operator: Any,
) -> None:
    missing_app = {**CONFIG, "application": {"name": "no-such-app", "namespace": kube.namespace}}
    kube.apply(gate("no-app", refserver, configConsistency=missing_app))
    closed = f"http://127.0.0.1:{free_port()}"
    no_prometheus = {
        "prometheusUrl": closed,
        "rules": [{"record": "job:requests:rate_sum"}],
        "timeoutSeconds": 2,
    }
    kube.apply(gate("no-prometheus", refserver, metricDrift=no_prometheus))

    app = evaluated(kube, "no-app", 1)
    config = row(app, "config-consistency")
    assert (config["verdict"], config["reason"]) == ("Inconclusive", "ApplicationNotFound"), config
    assert f"Application {kube.namespace}/no-such-app" in config["message"]
    prom = evaluated(kube, "no-prometheus", 1)
    drift = row(prom, "metric-drift")
    assert (drift["verdict"], drift["reason"]) == ("Inconclusive", "PrometheusUnreachable"), drift
    assert closed in drift["message"] and drift["source"] == closed
    for obj, reason in ((app, "ApplicationNotFound"), (prom, "PrometheusUnreachable")):
        ready = stack.condition_of(obj)
        assert (ready["status"], ready["reason"]) == ("False", reason), obj["status"]
        assert obj["status"]["verdict"] == "Inconclusive" and obj["status"]["evaluations"] == 1

    # neither is evaluated again: no retry loop, no status churn, and the operator is still up
    versions = {
        name: kube.get("mcpreadiness", name)["metadata"]["resourceVersion"]
        for name in ("no-app", "no-prometheus")
    }
    time.sleep(10)
    for name, version in versions.items():
        later = kube.get("mcpreadiness", name)
        assert later["status"]["evaluations"] == 1, later["status"]
        assert later["metadata"]["resourceVersion"] == version, name
    assert operator.process.exited() is None
