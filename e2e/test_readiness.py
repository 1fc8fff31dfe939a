"""MCPReadiness end to end: kubectl apply, the operator probes a real server, kubectl wait."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import yaml

from mcp_devcluster import stack
from mcp_devcluster.processes import free_port

SAMPLE = "mcpreadiness-refserver.yaml"


def _variant(text: str, name: str, **probe: Any) -> str:
    doc = yaml.safe_load(text)
    doc["metadata"]["name"] = name
    doc["spec"]["checks"]["healthProbe"].update(probe)
    return yaml.safe_dump(doc)


def test_sample_becomes_ready_and_kubectl_wait_returns(kube: Any, refserver: str, sample: Any) -> None:
    kube.apply(sample(SAMPLE, refserver))
    waited = kube.wait("mcpreadiness/refserver-ready", "condition=Ready", timeout_s=60)
    assert waited.returncode == 0, waited.stderr
    obj = kube.get("mcpreadiness", "refserver-ready")
    status = obj["status"]
    assert status["verdict"] == "Pass"
    assert status["score"] == 100
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert stack.condition_of(obj)["observedGeneration"] == obj["metadata"]["generation"]
    check = status["checks"][0]
    assert check["name"] == "health-probe"
    assert check["observed"]["requests"] == "2000"
    assert check["observed"]["succeeded"] == "2000"
    table = kube.run("get", "mcpr", "refserver-ready").stdout
    assert "True" in table and "Pass" in table and "100" in table
    reasons = {e["reason"] for e in kube.events("refserver-ready")}
    assert "Ready" in reasons


def test_unreachable_target_gives_ready_false(kube: Any, sample: Any) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    kube.apply(_variant(sample(SAMPLE, closed), "unreachable", requests=1000, minSuccessRatio=0.99))
    waited = kube.wait("mcpreadiness/unreachable", "condition=Ready=false", timeout_s=60)
    assert waited.returncode == 0, waited.stderr
    obj = kube.get("mcpreadiness", "unreachable")
    assert stack.condition_of(obj)["reason"] == "TargetUnreachable"
    assert obj["status"]["verdict"] == "Error"
    assert obj["status"]["checks"][0]["observed"]["succeeded"] == "0"


def test_latency_threshold_breach_fails_with_measured_p99(kube: Any, refserver: str, sample: Any) -> None:
    # this test is about the breach and its figure: the prober's lag is accepted up to the schema's
    # limit, since a busy CI host would otherwise (rightly) call the round ProberOverloaded; the
    # lag rule has its own tests (tests/checks/test_checks_health.py)
    strict = {"maxP99Ms": 0.001, "maxP50Ms": 0.001, "maxProberLagMs": 10000}
    kube.apply(_variant(sample(SAMPLE, refserver), "too-strict", **strict))
    assert kube.wait("mcpreadiness/too-strict", "condition=Ready=false", timeout_s=60).returncode == 0
    obj = kube.get("mcpreadiness", "too-strict")
    assert stack.condition_of(obj)["reason"] == "LatencyAboveThreshold"
    assert obj["status"]["verdict"] == "Fail"
    p99_ms = float(obj["status"]["checks"][0]["observed"]["p99"].removesuffix("ms"))
    assert p99_ms > 0.001


def test_schema_violations_are_rejected_with_field_path(kube: Any, refserver: str, sample: Any) -> None:
    bad_range = kube.apply(_variant(sample(SAMPLE, refserver), "bad-range", requests=-5), check=False)
    assert bad_range.returncode != 0
    assert "spec.checks.healthProbe.requests" in bad_range.stderr

    doc = yaml.safe_load(sample(SAMPLE, refserver))
    doc["metadata"]["name"] = "both-targets"
    doc["spec"]["target"]["serviceRef"] = {"name": "triton"}
    both = kube.apply(yaml.safe_dump(doc), check=False)
    assert both.returncode != 0
    assert "spec.target" in both.stderr and "exactly one of url and serviceRef" in both.stderr

    doc = yaml.safe_load(sample(SAMPLE, refserver))
    doc["metadata"]["name"] = "p50-over-p99"
    doc["spec"]["checks"]["healthProbe"].update(maxP50Ms=300, maxP99Ms=200)
    order = kube.apply(yaml.safe_dump(doc), check=False)
    assert order.returncode != 0
    assert "spec.checks.healthProbe.maxP50Ms" in order.stderr

    doc = yaml.safe_load(sample(SAMPLE, refserver))
    doc["metadata"]["name"] = "typo"
    doc["spec"]["checks"]["healthProbe"]["requets"] = 10
    typo = kube.apply(yaml.safe_dump(doc), check=False)
    assert typo.returncode != 0
    assert "requets" in typo.stderr
    listed = kube.run("get", "mcpr", "-o", "name").stdout
    assert "bad-range" not in listed and "both-targets" not in listed and "typo" not in listed


def test_semantic_errors_become_conditions_without_a_hot_loop(kube: Any, refserver: str, sample: Any) -> None:
    kube.apply(_variant(sample(SAMPLE, refserver), "impossible", requests=100, minSuccessRatio=0.9999))
    doc = yaml.safe_load(sample(SAMPLE, refserver))
    doc["metadata"]["name"] = "no-service"
    doc["spec"]["target"] = {"serviceRef": {"name": "missing-triton", "port": 8000}}
    kube.apply(yaml.safe_dump(doc))
    for name, reason in (("impossible", "ImpossibleThreshold"), ("no-service", "TargetNotFound")):
        assert kube.wait(f"mcpreadiness/{name}", "condition=Ready=false", timeout_s=60).returncode == 0
        obj = kube.get("mcpreadiness", name)
        accepted = next(c for c in obj["status"]["conditions"] if c["type"] == "Accepted")
        assert accepted["status"] == "False" and accepted["reason"] == reason
        assert obj["status"]["phase"] == "Invalid"
    impossible = kube.get("mcpreadiness", "impossible")
    assert "10000" in stack.condition_of(impossible)["message"]
    version = impossible["metadata"]["resourceVersion"]
    time.sleep(4)
    assert kube.get("mcpreadiness", "impossible")["metadata"]["resourceVersion"] == version


def test_spec_update_is_evaluated_again(kube: Any, refserver: str, sample: Any) -> None:
    kube.apply(_variant(sample(SAMPLE, refserver), "updated", maxP99Ms=0.001))
    assert kube.wait("mcpreadiness/updated", "condition=Ready=false", timeout_s=60).returncode == 0
    kube.run(
        "patch",
        "mcpreadiness",
        "updated",
        "--type=merge",
        "-p",
        '{"spec":{"checks":{"healthProbe":{"maxP99Ms":250}}}}',
    )
    assert kube.wait("mcpreadiness/updated", "condition=Ready", timeout_s=60).returncode == 0
    obj = kube.get("mcpreadiness", "updated")
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["observedGeneration"] == 2


def test_operator_serves_its_own_metrics(kube: Any, refserver: str, sample: Any, operator: Any) -> None:
    kube.apply(_variant(sample(SAMPLE, refserver), "metrics", requests=1000, minSuccessRatio=0.99))
    assert kube.wait("mcpreadiness/metrics", "condition=Ready", timeout_s=60).returncode == 0
    with urllib.request.urlopen(operator.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    assert 'mcp_operator_verdicts_total{kind="MCPReadiness",verdict="Pass"}' in text
    assert "mcp_operator_check_duration_seconds_count" in text


def test_standing_gate_turns_not_ready_when_the_target_goes_away(
    kube: Any, sample: Any, tmp_path: Any
) -> None:
    server, url = stack.start_refserver(tmp_path)
    try:
        doc = yaml.safe_load(_variant(sample(SAMPLE, url), "standing", requests=1000, minSuccessRatio=0.99))
        doc["spec"]["recheckIntervalSeconds"] = 10
        kube.apply(yaml.safe_dump(doc))
        assert kube.wait("mcpreadiness/standing", "condition=Ready", timeout_s=60).returncode == 0
    finally:
        stack.stop(server)
    assert kube.wait("mcpreadiness/standing", "condition=Ready=false", timeout_s=90).returncode == 0
    status = kube.get("mcpreadiness", "standing")["status"]
    assert status["evaluations"] >= 2
    assert [h["verdict"] for h in status["history"]][:1] == ["Pass"]
    assert status["history"][-1]["reason"] == "TargetUnreachable"
    assert "TargetUnreachable" in {e["reason"] for e in kube.events("standing")}


def test_pod_readiness_gate_holds_pods_until_the_gate_passes(kube: Any, sample: Any, tmp_path: Any) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gated", "labels": {"app": "model-server"}},
        "spec": {
            "nodeSelector": {"mcp2026.io/local-runner": "true"},
            "readinessGates": [{"conditionType": "mcp2026.io/ready"}],
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "unused", "command": ["sleep", "300"]}],
        },
    }
    kube.apply(yaml.safe_dump(pod))
    assert kube.wait("pod/gated", "jsonpath={.status.phase}=Running", timeout_s=60).returncode == 0
    ready = stack.condition_of(kube.get("pod", "gated"))
    assert ready["status"] == "False" and ready["reason"] == "ReadinessGatesNotReady"

    server, url = stack.start_refserver(tmp_path)
    try:
        doc = yaml.safe_load(_variant(sample(SAMPLE, url), "gate", requests=1000, minSuccessRatio=0.99))
        doc["spec"]["recheckIntervalSeconds"] = 10
        doc["spec"]["podReadinessGate"] = {"matchLabels": {"app": "model-server"}}
        kube.apply(yaml.safe_dump(doc))
        assert kube.wait("pod/gated", "condition=Ready", timeout_s=60).returncode == 0
        gate = stack.condition_of(kube.get("pod", "gated"), "mcp2026.io/ready")
        assert gate["status"] == "True" and gate["reason"] == "ChecksPassed"
        assert kube.get("mcpreadiness", "gate")["status"]["gatedPods"] == 1
    finally:
        stack.stop(server)
    assert kube.wait("pod/gated", "condition=Ready=false", timeout_s=90).returncode == 0
    gate = stack.condition_of(kube.get("pod", "gated"), "mcp2026.io/ready")
    assert gate["status"] == "False" and gate["reason"] == "TargetUnreachable"
    kube.run("delete", "pod", "gated", "--wait=false")
