"""MCPBenchmark end to end: CR -> Indexed Job -> pods that really run mcp_bench -> shard
results published through the API -> merged, checksum-verified status."""

from __future__ import annotations

import json
import time
from typing import Any

import yaml

from mcp_bench.results.document import loads_document
from mcp_devcluster import stack

SAMPLE = "mcpbenchmark-refserver.yaml"


def _pods(kube: Any, job: str) -> list[dict[str, Any]]:
    out = kube.run("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def test_sample_benchmark_merges_shards_that_really_ran(kube: Any, refserver: str, sample: Any) -> None:
    kube.apply(sample(SAMPLE, refserver))
    waited = kube.wait("mcpbenchmark/refserver-bench", "condition=Ready", timeout_s=120)
    assert waited.returncode == 0, waited.stderr
    obj = kube.get("mcpbenchmark", "refserver-bench")
    status = obj["status"]
    assert status["phase"] == "Succeeded" and status["verdict"] == "Pass"
    assert status["shards"] == {"expected": 2, "reported": 2, "rejected": 0, "succeeded": 2, "failed": 0}
    assert [row["level"] for row in status["results"]] == ["c=8", "c=32"]  # 2 shards x (4, 16)
    assert all(row["requests"] > 0 and row["errors"] == 0 for row in status["results"])
    assert status["engine"]["serverName"] == "mcp-refserver"

    job = kube.get("job", status["jobName"])
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    assert job["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    pods = _pods(kube, status["jobName"])
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] == "mcp-local"
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["exitCode"] == 0
        assert "result published" in terminated["message"]

    report = kube.get("configmap", status["reportName"])
    merged = loads_document(report["data"]["result.json"])  # raises when the checksum does not match
    assert [level.completed for level in merged.levels] == [row["requests"] for row in status["results"]]
    assert merged.shards == 2
    shard_maps = kube.run(
        "get", "configmaps", "-l", f"mcp2026.io/job={status['jobName']}", "-o", "name"
    ).stdout
    assert len(shard_maps.split()) == 2
    table = kube.run("get", "mcpb", "refserver-bench").stdout
    assert "Succeeded" in table and status["p99Ms"] in table


def test_gpu_shards_are_placed_on_gpu_nodes_and_missing_results_are_reported(
    kube: Any, refserver: str
) -> None:
    kube.run(
        "apply",
        "-f",
        "-",
        input_text=yaml.safe_dump(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "nvidia"},
                "handler": "nvidia",
            }
        ),
    )
    bench = stack.custom_resource(
        "MCPBenchmark",
        "gpu-bench",
        {
            "target": {"url": refserver, "backend": "http", "path": "/health"},
            "load": {"concurrency": [2], "requests": 10},
            "shards": 2,
            "runner": {
                "gpus": 1,
                "runtimeClassName": "nvidia",
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    )
    kube.apply(bench)
    assert kube.wait("mcpbenchmark/gpu-bench", "condition=Ready=false", timeout_s=120).returncode == 0
    obj = kube.get("mcpbenchmark", "gpu-bench")
    assert stack.condition_of(obj)["reason"] == "ShardResultMissing"
    assert obj["status"]["shards"]["reported"] == 0
    for pod in _pods(kube, obj["status"]["jobName"]):
        assert pod["spec"]["nodeName"].startswith("kwok-gpu-")
        container = pod["spec"]["containers"][0]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert pod["spec"]["runtimeClassName"] == "nvidia"


def test_suspended_benchmark_runs_when_resumed(kube: Any, refserver: str) -> None:
    bench = stack.custom_resource(
        "MCPBenchmark",
        "later",
        {
            "target": {"url": refserver, "backend": "http", "path": "/health"},
            "load": {"concurrency": [2], "requests": 50},
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
            "suspend": True,
        },
    )
    kube.apply(bench)
    assert kube.wait("mcpbenchmark/later", "jsonpath={.status.phase}=Suspended", timeout_s=60).returncode == 0
    job_name = kube.get("mcpbenchmark", "later")["status"]["jobName"]
    assert kube.get("job", job_name)["spec"]["suspend"] is True
    time.sleep(2)
    assert _pods(kube, job_name) == []
    kube.run("patch", "mcpbenchmark", "later", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    assert kube.wait("mcpbenchmark/later", "condition=Ready", timeout_s=120).returncode == 0
    status = kube.get("mcpbenchmark", "later")["status"]
    assert status["jobName"] == job_name  # resumed the same Job, not a new run
    assert status["results"][0]["requests"] == 50


def test_invalid_benchmark_specs(kube: Any, refserver: str) -> None:
    both = {"target": {"url": refserver}, "load": {"concurrency": [1], "rate": [5.0], "requests": 5}}
    rejected = kube.apply(stack.custom_resource("MCPBenchmark", "both-loads", both), check=False)
    assert rejected.returncode != 0
    assert "spec.load" in rejected.stderr and "exactly one of concurrency" in rejected.stderr

    no_model = stack.custom_resource(
        "MCPBenchmark",
        "no-model",
        {
            "target": {"url": refserver, "backend": "openai"},
            "load": {"concurrency": [1], "requests": 5},
        },
    )
    kube.apply(no_model)
    assert kube.wait("mcpbenchmark/no-model", "condition=Ready=false", timeout_s=60).returncode == 0
    obj = kube.get("mcpbenchmark", "no-model")
    assert stack.condition_of(obj)["reason"] == "ModelRequired"
    assert obj["status"]["phase"] == "Invalid"
    assert kube.run("get", "jobs", "-o", "name").stdout.strip() == ""


def test_deleting_a_running_benchmark_cancels_its_shards(kube: Any, refserver: str) -> None:
    bench = stack.custom_resource(
        "MCPBenchmark",
        "cancel-me",
        {
            "target": {"url": refserver, "backend": "http", "path": "/health"},
            "load": {"concurrency": [1], "durationSeconds": 300},
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
        },
    )
    kube.apply(bench)
    assert kube.wait("mcpbenchmark/cancel-me", "jsonpath={.status.phase}=Running").returncode == 0
    job = kube.get("mcpbenchmark", "cancel-me")["status"]["jobName"]
    deadline = time.monotonic() + 60
    while not _pods(kube, job) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _pods(kube, job), "the shard pod never appeared"
    kube.run("delete", "mcpbenchmark", "cancel-me", "--wait=true", "--timeout=60s")
    # the garbage collector notices a custom owner kind only after its next discovery sync
    # (every 30 s), so a CRD installed moments ago can take that long
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        _pods(kube, job) or kube.run("get", "job", job, check=False).returncode == 0
    ):
        time.sleep(0.5)
    left = [
        (p["metadata"].get("deletionTimestamp"), p["metadata"].get("finalizers"), p["status"].get("phase"))
        for p in _pods(kube, job)
    ]
    assert left == []
    assert kube.run("get", "job", job, check=False).returncode != 0


def test_shard_that_cannot_publish_says_why_in_the_condition(kube: Any, refserver: str) -> None:
    # a user-chosen service account without the right to create ConfigMaps: RBAC really applies
    spec = {
        "target": {"url": refserver, "backend": "http", "path": "/health"},
        "load": {"concurrency": [1], "requests": 5},
        "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}, "serviceAccountName": "default"},
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "no-rights", spec))
    assert kube.wait("mcpbenchmark/no-rights", "condition=Ready=false", timeout_s=120).returncode == 0
    ready = stack.condition_of(kube.get("mcpbenchmark", "no-rights"))
    assert ready["reason"] == "ShardResultMissing"
    assert "could not publish its result: 403" in ready["message"]


def test_a_restarted_operator_finishes_what_the_previous_one_started(
    kube: Any, refserver: str, operator: Any, tmp_path: Any
) -> None:
    spec = {
        "target": {"url": refserver, "backend": "http", "path": "/health"},
        "load": {"concurrency": [2], "durationSeconds": 4},
        "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "survivor", spec))

    def state() -> str:  # what to look at when a wait below runs out
        obj = kube.run("get", "mcpbenchmark", "survivor", "-o", "yaml", check=False).stdout
        pods = kube.run("get", "pods", "-o", "wide", check=False).stdout
        return f"{obj}\n{pods}\noperator log: {operator.process.log_tail(3000)}"

    assert kube.wait("mcpbenchmark/survivor", "jsonpath={.status.phase}=Running").returncode == 0, state()
    stack.stop(operator.process)  # the shards keep running without an operator
    job = kube.get("mcpbenchmark", "survivor")["status"]["jobName"]
    assert kube.wait(f"job/{job}", "condition=Complete", timeout_s=90).returncode == 0, state()
    assert stack.condition_of(kube.get("mcpbenchmark", "survivor")).get("status") != "True"
    replacement = stack.start_operator(kube.kubeconfig, tmp_path)
    operator.process = replacement.process  # the session fixture stops whichever runs last
    operator.metrics_url = replacement.metrics_url
    assert kube.wait("mcpbenchmark/survivor", "condition=Ready", timeout_s=90).returncode == 0, state()
    status = kube.get("mcpbenchmark", "survivor")["status"]
    assert status["jobName"] == job  # resumed, not started again
    assert status["shards"]["reported"] == 1


def test_locust_engine_runs_in_the_shard_pods_and_k6_limits_are_checked_up_front(
    kube: Any, refserver: str
) -> None:
    local = {"nodeSelector": {"mcp2026.io/local-runner": "true"}}
    spec = {
        "target": {"url": refserver, "backend": "http", "path": "/health"},
        "load": {"concurrency": [2], "durationSeconds": 2, "engine": "locust"},
        "runner": local,
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "by-locust", spec))
    k6_openai = {
        "target": {"url": refserver, "backend": "openai", "model": "refmodel"},
        "load": {"concurrency": [2], "requests": 10, "engine": "k6"},
        "runner": local,
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "k6-openai", k6_openai))
    assert kube.wait("mcpbenchmark/k6-openai", "condition=Ready=false", timeout_s=60).returncode == 0
    rejected = stack.condition_of(kube.get("mcpbenchmark", "k6-openai"))
    assert rejected["reason"] == "UnsupportedByEngine" and "backend" in rejected["message"]

    assert kube.wait("mcpbenchmark/by-locust", "condition=Ready", timeout_s=120).returncode == 0
    status = kube.get("mcpbenchmark", "by-locust")["status"]
    assert status["engine"]["engine"] == "locust"
    assert status["results"][0]["requests"] > 0 and status["results"][0]["errors"] == 0
