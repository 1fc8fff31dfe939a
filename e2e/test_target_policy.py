"""The operator's target policy on the real control plane: a spec cannot point the operator at
the cloud metadata address or at another namespace's Service; the answer is a condition,
recorded once, and no request is sent."""

from __future__ import annotations

import time
from typing import Any

from mcp_devcluster import stack


def test_metadata_address_is_not_probed(kube: Any) -> None:
    spec = {
        "target": {"url": "http://169.254.169.254"},
        "checks": {"healthProbe": {"path": "/latest/meta-data"}},
    }
    kube.apply(stack.custom_resource("MCPReadiness", "imds", spec))
    assert kube.wait("mcpreadiness/imds", "condition=Ready=false", timeout_s=60).returncode == 0
    obj = kube.get("mcpreadiness", "imds")
    ready = stack.condition_of(obj)
    assert ready["reason"] == "TargetNotAllowed" and "169.254.169.254" in ready["message"]
    assert obj["status"]["phase"] == "Invalid" and not obj["status"].get("checks")
    version = obj["metadata"]["resourceVersion"]
    time.sleep(5)
    assert kube.get("mcpreadiness", "imds")["metadata"]["resourceVersion"] == version  # no hot loop


def test_another_namespaces_service_is_refused_for_a_benchmark(kube: Any) -> None:
    spec = {
        "target": {"serviceRef": {"name": "kube-dns", "namespace": "kube-system", "port": 53}},
        "load": {"concurrency": [1], "requests": 10},
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "elsewhere", spec))
    assert kube.wait("mcpbenchmark/elsewhere", "condition=Ready=false", timeout_s=60).returncode == 0
    obj = kube.get("mcpbenchmark", "elsewhere")
    assert stack.condition_of(obj)["reason"] == "TargetNotAllowed"
    assert "MCP_TARGET_ALLOW_NAMESPACES" in stack.condition_of(obj)["message"]
    jobs = kube.run("get", "jobs", "-o", "name").stdout.strip()
    assert jobs == ""  # nothing was started


def test_a_runner_image_or_account_outside_the_allow_lists_is_refused(kube: Any) -> None:
    base = {"target": {"url": "http://127.0.0.1:1"}, "load": {"concurrency": [1], "requests": 10}}
    kube.apply(
        stack.custom_resource("MCPBenchmark", "own-image", {**base, "runner": {"image": "evil.example/x:1"}})
    )
    kube.apply(
        stack.custom_resource(
            "MCPBenchmark", "own-account", {**base, "runner": {"serviceAccountName": "admin"}}
        )
    )
    for name, field in (
        ("own-image", "spec.runner.image"),
        ("own-account", "spec.runner.serviceAccountName"),
    ):
        assert kube.wait(f"mcpbenchmark/{name}", "condition=Ready=false", timeout_s=60).returncode == 0
        ready = stack.condition_of(kube.get("mcpbenchmark", name))
        assert ready["reason"] == "RunnerNotAllowed" and field in ready["message"]
    assert kube.run("get", "jobs", "-o", "name").stdout.strip() == ""


def test_a_name_that_does_not_resolve_is_waited_for_not_refused(kube: Any, operator: Any) -> None:
    """Cluster DNS may be late: a target or check source that does not resolve is not dialled,
    and it is no refusal that stands either; both resources say which field, once, and wait,
    without an ERROR line (or an event of kopf's) at every look again."""
    late = "no-such-service.late-dns.invalid"
    kube.apply(
        stack.custom_resource(
            "MCPBenchmark",
            "late-target",
            {"target": {"url": f"http://{late}:8000"}, "load": {"concurrency": [1], "requests": 10}},
        )
    )
    kube.apply(
        stack.custom_resource(
            "MCPReadiness",
            "late-source",
            {
                "target": {"url": "http://127.0.0.1:9"},
                "checks": {
                    "metricDrift": {"prometheusUrl": f"http://{late}:9090", "rules": [{"record": "r"}]}
                },
            },
        )
    )
    for kind, name, field in (
        ("mcpbenchmark", "late-target", "spec.target.url"),
        ("mcpreadiness", "late-source", "spec.checks.metricDrift.prometheusUrl"),
    ):
        assert kube.wait(f"{kind}/{name}", "condition=Ready=false", timeout_s=60).returncode == 0
        obj = kube.get(kind, name)
        ready, accepted = stack.condition_of(obj), stack.condition_of(obj, "Accepted")
        assert ready["reason"] == "TargetUnresolved" and ready["message"].startswith(f"{field}: {late}")
        assert (accepted["status"], accepted["reason"]) == ("Unknown", "TargetUnresolved")
        status = obj["status"]
        assert status.get("phase") != "Invalid" and "verdict" not in status and not status.get("checks")
    time.sleep(20)  # past one retry (15 s): still waiting, and still one event each
    for kind, name in (("mcpbenchmark", "late-target"), ("mcpreadiness", "late-source")):
        assert stack.condition_of(kube.get(kind, name))["reason"] == "TargetUnresolved"
        events = kube.events(name)
        assert [e["reason"] for e in events].count("TargetUnresolved") == 1
        assert not [e for e in events if "failed temporarily" in e.get("message", "")], events
    logged = operator.process.log_path.read_text(errors="replace").splitlines()
    waits = [line for line in logged if "failed temporarily" in line and late in line]
    assert not waits, waits[:3]
    assert kube.run("get", "jobs", "-o", "name").stdout.strip() == ""
