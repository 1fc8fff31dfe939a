"""Argo CD health checks (manifests/argocd/*.lua) run in gopher-lua, Argo CD's interpreter,
against objects the operator really wrote."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from mcp_devcluster import build, stack
from mcp_devcluster.processes import free_port

ARGOCD = Path(__file__).resolve().parents[1] / "manifests" / "argocd"


def health(script: str, obj: dict[str, Any]) -> dict[str, str]:
    result = subprocess.run(
        [str(build.binary("luahealth", "luahealth")), str(ARGOCD / script)],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    parsed: dict[str, str] = json.loads(result.stdout)
    return parsed


def _readiness(name: str, url: str, **probe: Any) -> str:
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 1000, "minSuccessRatio": 0.99, **probe}},
    }
    return stack.custom_resource("MCPReadiness", name, spec)


def test_readiness_health_follows_the_ready_condition(kube: Any, refserver: str) -> None:
    kube.apply(_readiness("healthy", refserver))
    kube.apply(_readiness("degraded", f"http://127.0.0.1:{free_port()}"))
    assert kube.wait("mcpreadiness/healthy", "condition=Ready").returncode == 0
    assert kube.wait("mcpreadiness/degraded", "condition=Ready=false").returncode == 0

    healthy = health("health-mcpreadiness.lua", kube.get("mcpreadiness", "healthy"))
    assert healthy["status"] == "Healthy" and "verdict Pass" in healthy["message"]
    degraded = health("health-mcpreadiness.lua", kube.get("mcpreadiness", "degraded"))
    assert degraded["status"] == "Degraded" and degraded["message"].startswith("TargetUnreachable:")

    stale = kube.get("mcpreadiness", "healthy")
    stale["metadata"]["generation"] += 1  # a spec change the operator has not evaluated yet
    assert health("health-mcpreadiness.lua", stale)["status"] == "Progressing"
    fresh = {"metadata": {"name": "new", "generation": 1}, "spec": {}}
    assert health("health-mcpreadiness.lua", fresh)["status"] == "Progressing"


def test_benchmark_health_reports_suspended_and_failed_runs(kube: Any, refserver: str) -> None:
    bench = stack.custom_resource(
        "MCPBenchmark",
        "paused",
        {
            "target": {"url": refserver, "path": "/health"},
            "load": {"concurrency": [1], "requests": 5},
            "suspend": True,
        },
    )
    kube.apply(bench)
    assert kube.wait("mcpbenchmark/paused", "jsonpath={.status.phase}=Suspended").returncode == 0
    assert health("health-mcpbenchmark.lua", kube.get("mcpbenchmark", "paused"))["status"] == "Suspended"

    broken_spec = {
        "target": {"url": refserver, "backend": "openai"},
        "load": {"concurrency": [1], "requests": 5},
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "broken", broken_spec))
    assert kube.wait("mcpbenchmark/broken", "condition=Ready=false").returncode == 0
    broken = health("health-mcpbenchmark.lua", kube.get("mcpbenchmark", "broken"))
    assert broken["status"] == "Degraded" and broken["message"].startswith("ModelRequired:")


def test_argocd_config_renders_both_checks(kube: Any) -> None:
    rendered = yaml.safe_load(kube.run("kustomize", str(ARGOCD)).stdout)
    assert rendered["metadata"]["name"] == "argocd-cm"
    assert set(rendered["data"]) == {
        "resource.customizations.health.mcp2026.io_MCPReadiness",
        "resource.customizations.health.mcp2026.io_MCPBenchmark",
    }


def test_postsync_gate_example_passes_server_side_validation(kube: Any) -> None:
    applied = kube.run("apply", "--dry-run=server", "-f", str(ARGOCD / "postsync-gate.yaml"), check=False)
    assert applied.returncode == 0, applied.stderr
    assert "mcpreadiness.mcp2026.io/release-gate created (server dry run)" in applied.stdout
