"""The contract between the operator and its shard pods, defined once and imported by both
the Job builder and the shard entrypoint: environment names, labels, the result key, the
``origin`` a shard signs into its document, and the names of the objects a run creates (all
derived from the Job's name, so one run's objects never collide with another's)."""

from __future__ import annotations

from typing import Any

from ..api.benchmark import KIND
from ..children import MAX_LABEL_VALUE, MAX_OBJECT_NAME, bounded_name, owner_reference

# what the Job gives each shard pod
ENV_PLAN = "MCP_BENCH_PLAN"
ENV_BENCHMARK_UID = "MCP_BENCHMARK_UID"
ENV_JOB_NAME = "MCP_JOB_NAME"
ENV_NAMESPACE = "MCP_NAMESPACE"
ENV_POD_NAME = "MCP_POD_NAME"  # downward API
ENV_POD_UID = "MCP_POD_UID"  # downward API: the collector checks it against the Job's pods
ENV_RESULT_KEY = "MCP_RESULT_KEY"  # the run's HMAC key, by secretKeyRef (never a value in the Job)
ENV_SECRET_HEADERS = "MCP_SECRET_HEADERS"  # JSON {header name: env var holding its value}
ENV_HEADER_PREFIX = "MCP_HEADER_"  # those env vars, each by secretKeyRef
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"  # set by Kubernetes for Indexed Jobs
ENV_START_BARRIER = "MCP_START_BARRIER"  # "1": wait for each level's common start time
ENV_ACTIVE_DEADLINE = "MCP_ACTIVE_DEADLINE_S"  # the Job's activeDeadlineSeconds: how long a result may wait
ENV_BARRIER_TIMEOUT = "MCP_BARRIER_TIMEOUT_S"  # how long to wait for it before starting alone
ENV_PROGRESS_INTERVAL = "MCP_PROGRESS_INTERVAL_S"  # least time between two progress writes
ANNOTATION_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # on the Job's pods

LABEL_BENCHMARK = "mcp2026.io/benchmark"
LABEL_BENCHMARK_UID = "mcp2026.io/benchmark-uid"
LABEL_JOB = "mcp2026.io/job"
LABEL_SHARD = "mcp2026.io/shard"
# progress and barrier objects carry this (the Job's name) instead of LABEL_JOB, so the collector's
# listing of result objects never sees them
LABEL_RUN_STATE = "mcp2026.io/run-state-of"
LABEL_COMPONENT = "app.kubernetes.io/component"
COMPONENT_SHARD = "bench-shard"
SHARD_CONTAINER = "shard"  # the shard pod's container: its log attests the result (``attestation``)

RESULT_KEY = "result.json"
PROGRESS_KEY = "progress.json"  # in <job>-progress-<i>, written by shard i
START_KEY = "start.json"  # in <job>-start, written by the operator: level index -> start (Unix ns)
# a progress report is a handful of counters; anything larger is not one and is ignored
PROGRESS_LIMIT_BYTES = 1024
# a ConfigMap holds 1 MiB of data; a result or report over this is shrunk (mcp_bench.results.fit)
RESULT_LIMIT_BYTES = 900 * 1024
KEY_SECRET_KEY = "hmac-sha256-key"
# the plan a run's shards run, in the run's Secret beside its key: what they dial (query values,
# literal header values) stays out of the Job, its pods and everything else anyone may read
PLAN_SECRET_KEY = "plan.json"

# what a shard signs into its document's origin: which run, which Job, which pod
ORIGIN_RUN_UID = "runUid"
ORIGIN_JOB = "job"
ORIGIN_POD = "pod"
ORIGIN_POD_UID = "podUid"


def benchmark_labels(benchmark: str, uid: str) -> dict[str, str]:
    """The name for people (bounded to a label value) and the UID for selectors."""
    return {LABEL_BENCHMARK: bounded_name(benchmark, MAX_LABEL_VALUE), LABEL_BENCHMARK_UID: uid}


def shard_object_name(job: str, index: int) -> str:
    return f"{job}-shard-{index}"


def shard_index_of(job: str, name: str) -> int | None:
    """The index in a result object's name, or None when the name is not ``<job>-shard-<i>``."""
    prefix = f"{job}-shard-"
    digits = name[len(prefix) :] if name.startswith(prefix) else ""
    if not digits.isascii() or not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return None
    return int(digits)


def progress_object_name(job: str, index: int) -> str:
    return f"{job}-progress-{index}"


def start_object_name(job: str) -> str:
    """The run's start barrier: the operator writes each level's start time there."""
    return f"{job}-start"


def run_state_object(*, name: str, job: str, benchmark: str, uid: str) -> dict[str, Any]:
    """An empty ConfigMap for a run's live state (a shard's progress, the start barrier), owned
    by the MCPBenchmark and created by the operator before the Job."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "labels": {**benchmark_labels(benchmark, uid), LABEL_RUN_STATE: job},
            "ownerReferences": [benchmark_owner(benchmark, uid, controller=False)],
        },
    }


def run_account_name(job: str) -> str:
    """The run's ServiceAccount, Role and RoleBinding."""
    return f"{job}-shard"


def run_key_name(job: str) -> str:
    """The run's Secret holding the HMAC key its shards sign with."""
    return f"{job}-key"


def report_name(benchmark: str) -> str:
    return bounded_name(benchmark, MAX_OBJECT_NAME, "-report")


def benchmark_owner(benchmark: str, uid: str, *, controller: bool = True) -> dict[str, Any]:
    return owner_reference(KIND, benchmark, uid, controller=controller)


def shard_result_object(*, job: str, index: int, benchmark: str, uid: str) -> dict[str, Any]:
    """The empty ConfigMap the operator creates for shard ``index`` before the Job: owned by the
    MCPBenchmark, labelled for the collector. The shard may only fill in its data (a Role cannot
    limit ``create`` by name, so shards create nothing)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": shard_object_name(job, index),
            "labels": {**benchmark_labels(benchmark, uid), LABEL_JOB: job, LABEL_SHARD: str(index)},
            "ownerReferences": [benchmark_owner(benchmark, uid, controller=False)],
        },
    }


def shard_result_patch(document_text: str) -> dict[str, Any]:
    """What a shard writes into its result object: the data only, never labels or owners."""
    return {"data": {RESULT_KEY: document_text}}


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
