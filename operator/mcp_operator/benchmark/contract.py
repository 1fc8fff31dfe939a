"""The contract between the operator and its shard pods, defined once and imported by both
the Job builder and the shard entrypoint: environment names, labels, the result key, and the
names of the objects a run creates."""

from __future__ import annotations

from typing import Any

from ..api.benchmark import KIND
from ..children import MAX_LABEL_VALUE, MAX_OBJECT_NAME, bounded_name, owner_reference

# what the Job gives each shard pod
ENV_PLAN = "MCP_BENCH_PLAN"
ENV_BENCHMARK_NAME = "MCP_BENCHMARK_NAME"
ENV_BENCHMARK_UID = "MCP_BENCHMARK_UID"
ENV_JOB_NAME = "MCP_JOB_NAME"
ENV_NAMESPACE = "MCP_NAMESPACE"
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"  # set by Kubernetes for Indexed Jobs

LABEL_BENCHMARK = "mcp2026.io/benchmark"
LABEL_BENCHMARK_UID = "mcp2026.io/benchmark-uid"
LABEL_JOB = "mcp2026.io/job"
LABEL_SHARD = "mcp2026.io/shard"
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT_SHARD = "bench-shard"

RESULT_KEY = "result.json"
SHARD_ACCOUNT = "mcp-bench-shard"


def benchmark_labels(benchmark: str, uid: str) -> dict[str, str]:
    """The name for people (bounded to a label value) and the UID for selectors."""
    return {LABEL_BENCHMARK: bounded_name(benchmark, MAX_LABEL_VALUE), LABEL_BENCHMARK_UID: uid}


def shard_object_name(job: str, index: int) -> str:
    return f"{job}-shard-{index}"


def report_name(benchmark: str) -> str:
    return bounded_name(benchmark, MAX_OBJECT_NAME, "-report")


def benchmark_owner(benchmark: str, uid: str, *, controller: bool = True) -> dict[str, Any]:
    return owner_reference(KIND, benchmark, uid, controller=controller)


def shard_result_object(
    *, job: str, index: int, benchmark: str, uid: str, document_text: str
) -> dict[str, Any]:
    """The ConfigMap a shard publishes: owned by the MCPBenchmark, labelled for the collector."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": shard_object_name(job, index),
            "labels": {**benchmark_labels(benchmark, uid), LABEL_JOB: job, LABEL_SHARD: str(index)},
            "ownerReferences": [benchmark_owner(benchmark, uid, controller=False)],
        },
        "data": {RESULT_KEY: document_text},
    }


def report_object(*, benchmark: str, uid: str, document_text: str) -> dict[str, Any]:
    """The ConfigMap holding the merged document (the CR's status holds only the table)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": report_name(benchmark),
            "labels": benchmark_labels(benchmark, uid),
            "ownerReferences": [benchmark_owner(benchmark, uid)],
        },
        "data": {RESULT_KEY: document_text},
    }
