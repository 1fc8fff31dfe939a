"""Entrypoint of one benchmark shard pod: run the plan with mcp_bench, publish the result.

Inputs come from the environment the Job sets (plan JSON, owner name and UID, completion
index). The result is published as a ConfigMap owned by the MCPBenchmark; if publishing
fails the pod fails with a termination message that says why, so the operator reports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from mcp_bench.engines import run_plan_sync
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.results.document import dumps_document
from mcp_bench.telemetry.observer import TelemetryObserver

from .. import kube
from .contract import (
    ENV_BENCHMARK_NAME,
    ENV_BENCHMARK_UID,
    ENV_COMPLETION_INDEX,
    ENV_JOB_NAME,
    ENV_NAMESPACE,
    ENV_PLAN,
    shard_object_name,
    shard_result_object,
)

EXIT_PLAN = 2
EXIT_PUBLISH = 4


def termination_message(message: str) -> None:
    """Write where the kubelet reads it: the remapped path locally, the standard path in a cluster."""
    path = Path(os.environ.get("MCP_TERMINATION_MESSAGE_PATH", "/dev/termination-log"))
    with contextlib.suppress(OSError):
        path.write_text(message[:4096])
    print(message, file=sys.stderr)


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise PlanError(f"environment variable {name} is not set")
    return value


def run_shard() -> int:
    try:
        plan = RunPlan.from_dict(json.loads(_env(ENV_PLAN)), source=ENV_PLAN)
        benchmark, uid, job = _env(ENV_BENCHMARK_NAME), _env(ENV_BENCHMARK_UID), _env(ENV_JOB_NAME)
        namespace = _env(ENV_NAMESPACE)
        index = int(os.environ.get(ENV_COMPLETION_INDEX, "0"))
    except (PlanError, ValueError) as exc:
        termination_message(f"shard cannot start: {exc}")
        return EXIT_PLAN
    # GPU telemetry on every shard: it says "unavailable" (and why) where there is no NVML
    document = run_plan_sync(plan, observers=[TelemetryObserver()])
    document.shard_index = index
    text = dumps_document(document)
    body = shard_result_object(job=job, index=index, benchmark=benchmark, uid=uid, document_text=text)
    api = kube.core()
    try:
        try:
            api.create_namespaced_config_map(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            api.replace_namespaced_config_map(shard_object_name(job, index), namespace, body)
    except ApiException as exc:
        termination_message(f"shard {index} could not publish its result: {exc.status} {exc.reason}")
        return EXIT_PUBLISH
    completed = sum(level.completed for level in document.levels)
    failed = sum(level.failed for level in document.levels)
    termination_message(f"shard {index}: {completed} requests completed, {failed} failed; result published")
    return 0
