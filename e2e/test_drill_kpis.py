"""The drill's measurements beyond recovery and hot updates, through the real operator:

- retry amplification: the reference server sheds load (``--max-inflight``) and counts every
  request it receives; a load whose clients retry without backoff makes a retry storm (the KPI
  fails with RetryStorm), its twin without retries passes;
- the HorizontalPodAutoscaler's lag: a real autoscaler in kube-controller-manager scales the
  reference server's Deployment on the harness's external metrics API (real request rates
  read from the pods); without that API the autoscaler is blind and the rows say so;
- Chaos Mesh: refused with ChaosMeshNotInstalled where its CRDs do not exist; with the CRDs
  (from the Go module proxy) an experiment is created, never injected (Chaos Mesh's controller
  cannot run here: no container engine), refused with ChaosNotInjected and always deleted;
- etcdLeaderMove on this single-member, not opted-in harness: refused, nothing touched (the
  measured outage is in test_control_plane_drill.py, on a cluster of three etcd members).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from mcp_devcluster import chaosmesh, stack
from mcp_devcluster.cluster import ClusterState
from mcp_devcluster.metricsapi import external_metrics
from mcp_operator.api.drill import FaultPolicy, FaultSpec
from mcp_operator.readiness.faults import FaultRefused, plan_fault
from mcp_operator.readiness.faults.controlplane import ENDPOINTS_ENV

OPT_IN = "mcp2026.io/fault-injection=enabled"
COUNTER = "mcp_refserver_http_requests_total"


def _drill(kube: Any, name: str, url: str, drill: dict[str, Any], timeout_s: int = 120) -> dict[str, Any]:
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 50, "minSuccessRatio": 0.9, "maxProberLagMs": 250}},
        "drill": {"kpis": {"healthSuccessRatio": 0.5}, **drill},
    }
    kube.apply(stack.custom_resource("MCPReadiness", name, spec))
    waited = kube.wait(f"mcpreadiness/{name}", "condition=Complete", timeout_s=timeout_s)
    obj = kube.get("mcpreadiness", name)
    assert waited.returncode == 0, json.dumps(obj.get("status"), indent=1)
    return obj


def _kpi(obj: dict[str, Any], name: str) -> dict[str, Any]:
    kpis = {k["name"]: k for k in obj["status"]["kpis"]}
    assert name in kpis, json.dumps(obj["status"]["kpis"], indent=1)
    return kpis[name]


def _check(obj: dict[str, Any], prefix: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["checks"] if c["name"].startswith(prefix))


# -- retry amplification ----------------------------------------------------------------------


@pytest.fixture
def shedding_server(tmp_path: Path) -> Iterator[str]:
    """The reference server holding two requests at a time and shedding the rest with 503."""
    proc, url = stack.start_refserver(tmp_path, "--max-inflight", "2")
    try:
        yield url
    finally:
        stack.stop(proc)


def _overload(url: str, retry: dict[str, Any] | None) -> dict[str, Any]:
    load: dict[str, Any] = {"rate": 60, "durationSeconds": 6, "path": "/delay?ms=50", "windowSeconds": 2}
    if retry is not None:
        load["retry"] = retry
    return {
        "stages": [{"name": "overload", "load": load}],
        "serverRequests": {
            "urls": [f"{url}/metrics"],
            "counters": [COUNTER],
            "matchLabels": {"path": "/delay"},
        },
        "kpis": {"healthSuccessRatio": 0.5, "retryAmplification": 1.5, "retryAmplificationWarn": 1.2},
    }


def test_clients_retrying_without_backoff_are_a_retry_storm_and_the_twin_without_retries_is_not(
    kube: Any, shedding_server: str
) -> None:
    storm = _drill(kube, "storm", shedding_server, _overload(shedding_server, {"attempts": 4}))
    twin = _drill(kube, "twin", shedding_server, _overload(shedding_server, None))
    stormy, calm = _kpi(storm, "retryAmplification"), _kpi(twin, "retryAmplification")
    print(f"retry amplification, clients retrying 4x without backoff: {stormy['measured']}")
    print(f"retry amplification, the twin without retries: {calm['measured']}")
    assert (stormy["verdict"], stormy["mark"]) == ("Fail", "✗"), stormy
    assert stormy["evidence"] == "stage overload" and stormy["threshold"] == "<= 1.5x"
    assert float(stormy["measured"].split("x", 1)[0]) > 1.5
    assert _check(storm, "kpi:retryAmplification")["reason"] == "RetryStorm"
    assert storm["status"]["verdict"] == "Fail"
    assert (calm["verdict"], calm["mark"]) == ("Pass", "✓"), calm
    assert float(calm["measured"].split("x", 1)[0]) < 1.05  # one request each, plus the engine's one probe


def test_a_counter_the_target_does_not_have_is_inconclusive_never_a_pass(kube: Any, refserver: str) -> None:
    drill = {
        "stages": [{"name": "s", "load": {"rate": 20, "durationSeconds": 2, "path": "/delay"}}],
        "serverRequests": {"urls": [f"{refserver}/metrics"], "counters": ["http_requests_total"]},
    }
    obj = _drill(kube, "no-counter", refserver, drill)
    row = _kpi(obj, "retryAmplification")
    assert (row["verdict"], row["mark"]) == ("Inconclusive", "?")
    assert "has no http_requests_total" in row["measured"]
    assert _check(obj, "kpi:retryAmplification")["reason"] == "ServerRequestsUnavailable"


# -- HorizontalPodAutoscaler lag ---------------------------------------------------------------

APP = "ref"


def _serve_autoscaled(kube: Any) -> str:
    """The reference server as a Deployment of one pod behind a Service, and an autoscaler on
    its request rate (external metric mcp_requests_per_second, 10 req/s per pod, 1 to 3 pods)."""
    container = stack.refserver_container()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "nodeSelector": {"mcp2026.io/local-runner": "true"},
                    "terminationGracePeriodSeconds": 2,
                    "containers": [container],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": APP},
        "spec": {"selector": {"app": APP}, "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]},
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": APP},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": APP},
            "minReplicas": 1,
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "External",
                    "external": {
                        "metric": {
                            "name": "mcp_requests_per_second",
                            "selector": {"matchLabels": {"service": APP}},
                        },
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                }
            ],
        },
    }
    kube.apply(yaml.safe_dump_all([deployment, service, hpa]))
    assert kube.run("rollout", "status", f"deploy/{APP}", "--timeout=90s", check=False).returncode == 0
    ip = kube.get("service", APP)["spec"]["clusterIP"]
    return f"http://{ip}:8080"


def _scaling_active(kube: Any) -> str:
    hpa = kube.get("hpa", APP)
    conds = {c["type"]: c for c in (hpa.get("status") or {}).get("conditions") or []}
    active = conds.get("ScalingActive") or {}
    return f"{active.get('status')} {active.get('reason')}"


def _rising(low: float, high: float, low_s: float, high_s: float) -> list[dict[str, Any]]:
    return [
        {"name": "baseline", "load": {"rate": low, "durationSeconds": low_s, "path": "/delay?ms=5"}},
        {"name": "spike", "load": {"rate": high, "durationSeconds": high_s, "path": "/delay?ms=5"}},
    ]


def test_the_autoscaler_lag_is_measured_and_a_blind_autoscaler_says_why(
    kube: Any, cluster: ClusterState, tmp_path: Path
) -> None:
    url = _serve_autoscaled(kube)
    stack.until(
        lambda: _scaling_active(kube).startswith("False"), "the autoscaler reports it cannot read its metric"
    )
    blind = _drill(kube, "blind", url, {"stages": _rising(2, 20, 2, 3), "autoscaling": {"workload": APP}})
    row = _kpi(blind, "hpaScaleUpSeconds")
    print(f"autoscaler without a metrics API: {row['measured']}")
    assert (row["verdict"], row["mark"]) == ("Inconclusive", "?")
    assert _check(blind, "kpi:hpaScaleUpSeconds")["reason"] == "AutoscalerBlind"
    assert "FailedGetExternalMetric" in row["measured"]

    with external_metrics(cluster, kube.namespace, tmp_path):
        stack.until(
            lambda: _scaling_active(kube).startswith("True"),
            "the autoscaler reads the request rate",
            timeout_s=60,
            state=lambda: _scaling_active(kube),
        )
        drill = {"stages": _rising(3, 30, 6, 20), "autoscaling": {"workload": APP}}
        obj = _drill(kube, "lag", url, drill, timeout_s=180)
        status = kube.get("hpa", APP)["status"]
    up, ready = _kpi(obj, "hpaScaleUpSeconds"), _kpi(obj, "hpaReadySeconds")
    print(f"autoscaler lag, load rise to desired replicas: {up['measured']} ({up['evidence']})")
    print(f"autoscaler lag, load rise to the new pods Ready: {ready['measured']}")
    assert up["verdict"] == "Pass" and ready["verdict"] == "Pass", (up, ready)
    assert "stage spike" in up["evidence"] and "1 to" in up["evidence"]
    rise, to_ready = float(up["measured"].split(" s")[0]), float(ready["measured"].split(" s")[0])
    assert 0 < rise <= to_ready < 20
    assert status["desiredReplicas"] >= 2


# -- Chaos Mesh --------------------------------------------------------------------------------

CHAOS_PLURALS = ["networkchaos", "stresschaos", "podchaos"]


def _kwok_pods(kube: Any) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "srv"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "srv"}},
            "template": {
                "metadata": {"labels": {"app": "srv"}},
                "spec": {
                    "nodeSelector": {"type": "kwok"},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "registry.example/srv:1"}],
                },
            },
        },
    }
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    kube.apply(json.dumps(body))
    stack.until(
        lambda: int(kube.get("deployment", "srv").get("status", {}).get("readyReplicas") or 0) == 2,
        "srv ready",
    )


def _network_delay(timeout_s: float) -> dict[str, Any]:
    chaos = {
        "kind": "NetworkChaos",
        "injectTimeoutSeconds": timeout_s,
        "recoverTimeoutSeconds": 10,
        "spec": {
            "action": "delay",
            "mode": "all",
            "selector": {"labelSelectors": {"app": "srv"}},
            "delay": {"latency": "100ms"},
            "duration": "60s",
        },
    }
    stage = {
        "name": "net",
        "load": {"rate": 10, "durationSeconds": 5},
        "faults": [{"kind": "chaosMesh", "atSeconds": 0.5, "chaos": chaos}],
    }
    return {"stages": [stage], "faultPolicy": {"maxPods": 2}}


def _chaos_objects(kube: Any) -> list[str]:
    out = kube.run("get", "networkchaos", "-o", "name", check=False)
    return out.stdout.split() if out.returncode == 0 else []


def test_chaos_mesh_faults_need_its_crds_and_an_experiment_never_injected_is_removed(
    kube: Any, kubeconfig: Path, refserver: str
) -> None:
    _kwok_pods(kube)
    absent = _drill(kube, "no-chaos-mesh", refserver, _network_delay(3))
    (fault,) = absent["status"]["faults"]
    assert fault["phase"] == "Skipped" and "ChaosMeshNotInstalled" in fault["message"]
    row = _check(absent, "fault:")
    assert (row["verdict"], row["reason"]) == ("Error", "ChaosMeshNotInstalled")

    files = chaosmesh.crd_files(CHAOS_PLURALS)
    try:
        for f in files:
            stack.kubectl(kubeconfig, "apply", "--server-side", "-f", str(f))
        stack.kubectl(
            kubeconfig,
            "wait",
            "--for=condition=Established",
            "crd",
            *(f"{p}.chaos-mesh.org" for p in CHAOS_PLURALS),
        )
        spec = {
            "target": {"url": refserver},
            "checks": {"healthProbe": {"requests": 50, "minSuccessRatio": 0.9, "maxProberLagMs": 250}},
            "drill": {"kpis": {"healthSuccessRatio": 0.5}, **_network_delay(3)},
        }
        kube.apply(stack.custom_resource("MCPReadiness", "chaos", spec))
        seen: set[str] = set()
        deadline = time.monotonic() + 120
        while stack.condition_of(kube.get("mcpreadiness", "chaos"), "Complete").get("status") != "True":
            seen.update(_chaos_objects(kube))
            assert time.monotonic() < deadline, kube.get("mcpreadiness", "chaos").get("status")
            time.sleep(0.2)
        obj = kube.get("mcpreadiness", "chaos")
        (fault,) = obj["status"]["faults"]
        print(f"Chaos Mesh experiment without its controller: {fault['message']}")
        assert seen and all(name.startswith("networkchaos.chaos-mesh.org/mcp-drill-") for name in seen), seen
        assert fault["phase"] == "Reverted" and "ChaosNotInjected" in fault["message"]
        assert "was created" in fault["message"] and "deleted NetworkChaos" in fault["message"]
        row = _check(obj, "fault:")
        assert (row["verdict"], row["reason"]) == ("Error", "ChaosNotInjected")
        assert _chaos_objects(kube) == []  # removed, checked through the API
        assert stack.condition_of(obj, "FaultsReverted")["status"] == "True"
    finally:
        stack.kubectl(
            kubeconfig,
            "delete",
            "crd",
            *(f"{p}.chaos-mesh.org" for p in CHAOS_PLURALS),
            "--ignore-not-found",
            check=False,
        )


# -- etcdLeaderMove where it is not allowed ------------------------------------------------------


def test_a_control_plane_fault_is_refused_unless_the_operator_was_given_etcd(
    kube: Any, kubeconfig: Path, cluster: ClusterState, refserver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    stage = {"name": "s", "load": {"rate": 10, "durationSeconds": 2}, "faults": [{"kind": "etcdLeaderMove"}]}
    obj = _drill(kube, "no-etcd", refserver, {"stages": [stage]})
    (fault,) = obj["status"]["faults"]
    assert fault["phase"] == "Skipped" and "ControlPlaneFaultsDisabled" in fault["message"]
    assert _check(obj, "fault:")["reason"] == "ControlPlaneFaultsDisabled"
    assert kube.run("get", "configmaps", "-l", "mcp2026.io/write-probe", "-o", "name").stdout == ""

    # given the harness's one etcd member, the fault plans against the real etcd and is refused
    monkeypatch.setenv(ENDPOINTS_ENV, ",".join(cluster.etcd_endpoints))
    api = config.new_client_from_config(str(kubeconfig))
    try:
        with pytest.raises(FaultRefused) as refused:
            asyncio.run(plan_fault(FaultSpec(kind="etcdLeaderMove"), kube.namespace, FaultPolicy(), api))
    finally:
        api.close()
    assert refused.value.reason == "SingleMemberEtcd" and "1 voting member" in str(refused.value)
