"""A drill whose stage load runs as shard Jobs (``spec.drill.shards``) through the real operator:
each stage an MCPBenchmark owned by the gate, its shard pods on the local nodes (processes that
really send the load to the reference server), the merged, verified document read back into the
stage's row, the mixed stage a traffic mix (health, V2 inference, chat streaming) reported per
class, and a fault timed from when the shards' load started, not from when the drill created the
Jobs.
"""

from __future__ import annotations

import json
import math
import time
from datetime import datetime
from typing import Any

from mcp_devcluster import stack

OPT_IN = "mcp2026.io/fault-injection=enabled"
RUNNER = {"nodeSelector": {"mcp2026.io/local-runner": "true"}, "cpu": "100m", "memory": "128Mi"}
FAULT_AT_S = 1.0
MIX = [  # the mixed stage's traffic: health checks, V2 inference and chat streaming
    {"name": "health", "weight": 6, "backend": "http", "path": "/health"},
    {"name": "infer", "weight": 3, "backend": "triton-http", "model": "refmodel"},
    {"name": "chat", "weight": 1, "backend": "openai-chat", "model": "refmodel"},
]


def _unix(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def _gate(url: str) -> str:
    drill = {
        "shards": {"count": 2, "runner": RUNNER},
        "kpis": {"healthSuccessRatio": 0.98},
        "stages": [
            {"name": "baseline", "load": {"rate": 40, "durationSeconds": 3, "windowSeconds": 1}},
            {
                "name": "mixed",
                "load": {"rate": 80, "durationSeconds": 4, "windowSeconds": 1, "classes": MIX},
                "faults": [
                    {
                        "kind": "scaleDown",
                        "workload": "srv",
                        "replicas": 1,
                        "atSeconds": FAULT_AT_S,
                        "holdSeconds": 1,
                    }
                ],
            },
        ],
    }
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 100, "minSuccessRatio": 0.99, "maxProberLagMs": 250}},
        "drill": drill,
    }
    return stack.custom_resource("MCPReadiness", "sharded", spec)


def _listed(kube: Any, kind: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(kube.run("get", kind, "-l", selector, "-o", "json").stdout)[
        "items"
    ]
    return items


def _first_level_start_s(kube: Any, benchmark: dict[str, Any]) -> float:
    """Level 0's start as the operator wrote it for the shards (Unix seconds)."""
    job = benchmark["status"]["jobName"]
    start = kube.get("configmap", f"{job}-start")
    return int(json.loads(start["data"]["start.json"])["levels"]["0"]) / 1e9


def test_stage_load_runs_as_shard_jobs_and_faults_count_from_its_start(kube: Any, refserver: str) -> None:
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    kube.apply(stack.kwok_deployment())
    stack.until(
        lambda: int(kube.get("deployment", "srv").get("status", {}).get("readyReplicas") or 0) == 3,
        "srv ready",
    )
    began = time.time()
    kube.apply(_gate(refserver))
    waited = kube.wait("mcpreadiness/sharded", "condition=Complete", timeout_s=240)
    gate = kube.get("mcpreadiness", "sharded")
    status = gate["status"]
    assert waited.returncode == 0, json.dumps(status, indent=1)
    rows = {row["name"]: row for row in status["stages"]}
    assert [r["phase"] for r in rows.values()] == ["Done", "Done"], rows
    children = {
        b["metadata"]["labels"]["mcp2026.io/drill-stage"]: b
        for b in _listed(kube, "mcpbenchmarks", "mcp2026.io/drill-of=sharded")
    }
    assert set(children) == {"baseline", "mixed"}
    for stage, rate, seconds in (("baseline", 40, 3), ("mixed", 80, 4)):
        child, row = children[stage], rows[stage]
        assert row["loadFrom"] == f"MCPBenchmark {child['metadata']['name']}, 2 shard(s)"
        (owner,) = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("MCPReadiness", gate["metadata"]["uid"])
        assert child["status"]["phase"] == "Succeeded", child["status"]
        # each shard its share of the rate, one level per window, only the first held at the barrier
        assert child["spec"]["load"]["rate"] == [rate / 2] * seconds
        assert child["spec"]["startBarrier"]["everyLevel"] is False
        assert len(row["windows"]) == seconds
        # open loop: the shards together sent the stage's rate (Poisson arrivals over a few seconds)
        assert 0.6 * rate <= float(row["achievedRps"]) <= 1.4 * rate, row
        pods = _listed(kube, "pods", f"job-name={child['status']['jobName']}")
        assert len(pods) == 2 and all(p["status"]["phase"] == "Succeeded" for p in pods)
        assert all(p["spec"]["nodeName"].startswith("mcp-local") for p in pods)
    # the mix's classes, each over its own protocol, figures of their own (none failed)
    classes = {c["name"]: c for c in rows["mixed"]["classes"]}
    assert set(classes) == {"health", "infer", "chat"}, rows["mixed"]
    assert all(c["completed"] > 0 and c["errors"] == 0 and c["p99Ms"] for c in classes.values()), classes
    assert children["mixed"]["spec"]["target"]["backend"] == "mix"
    assert "classes" not in rows["baseline"]
    (fault,) = status["faults"]
    assert (fault["kind"], fault["phase"]) == ("scaleDown", "Reverted"), fault
    # the fault's offset counts from the shards' start (the barrier's, seconds after the drill
    # created their Job), not from the stage's (journal times are whole seconds)
    load_started = _first_level_start_s(kube, children["mixed"])
    assert load_started - _unix(rows["mixed"]["startedAt"]) >= 1.0, (rows["mixed"], load_started)
    assert _unix(fault["injectedAt"]) >= math.floor(load_started + FAULT_AT_S), (fault, load_started)
    assert _unix(fault["injectedAt"]) <= load_started + FAULT_AT_S + 3.0, (fault, load_started)
    assert load_started > began
    assert int(kube.get("deployment", "srv")["spec"]["replicas"]) == 3  # restored
    kpis = {k["name"]: k for k in status["kpis"]}
    assert kpis["healthSuccessRatio"]["mark"] == "✓", kpis
    # deleting the gate takes its stage benchmarks with it (owner references)
    kube.run("delete", "mcpreadiness", "sharded", "--wait=true", "--timeout=120s")
    stack.until(
        lambda: not _listed(kube, "mcpbenchmarks", "mcp2026.io/drill-of=sharded"), "stage benchmarks gone"
    )


def test_client_retries_with_shard_jobs_are_refused_at_apply_time_naming_the_field(kube: Any) -> None:
    """Client retries run in the operator's own engine only; with shard Jobs the API server
    refuses the spec instead of a drill that would quietly send no retries."""
    load = {"rate": 10, "durationSeconds": 1, "retry": {"attempts": 2}}
    spec = {
        "target": {"url": "http://srv:8000"},
        "drill": {"shards": {"count": 2}, "stages": [{"name": "baseline", "load": load}]},
    }
    refused = kube.apply(stack.custom_resource("MCPReadiness", "retrying", spec), check=False)
    assert refused.returncode != 0
    assert "spec.drill.shards" in refused.stderr and "load.retry" in refused.stderr, refused.stderr
