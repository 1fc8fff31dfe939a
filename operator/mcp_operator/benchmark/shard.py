"""Entrypoint of one benchmark shard pod: run the plan with mcp_bench, sign and publish the result.

Inputs come from the environment the Job sets (plan JSON, owner name and UID, completion index,
the pod's own name and UID from the downward API, the run's key and any header values from
Secrets, the last two by reference). The document names its origin (run UID, Job, pod UID) and
is signed with the run's key; it is written into the result ConfigMap the operator created for
this index (the shard may update only that), and its digest is printed to stdout, where the
operator reads it back through the pod's log (``attestation``). Header values never go into the
document: it carries the plan as the operator wrote it. If publishing fails the pod fails with a
termination message that says why, so the operator reports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from kubernetes.client.exceptions import ApiException

from mcp_bench.api import (
    ObserverArgError,
    PlanError,
    ResultDocument,
    RunPlan,
    TelemetryObserver,
    dumps_within,
    plan_observers,
    run_plan_sync,
    shard_plan,
)

from .. import kube
from ..redact import REDACTED, redact_text
from .attestation import attestation_line
from .barrier import BARRIER_FIRST_LEVEL, parse_starts
from .contract import (
    ENV_ACTIVE_DEADLINE,
    ENV_BARRIER_TIMEOUT,
    ENV_BENCHMARK_UID,
    ENV_COMPLETION_INDEX,
    ENV_JOB_NAME,
    ENV_NAMESPACE,
    ENV_PLAN,
    ENV_POD_NAME,
    ENV_POD_UID,
    ENV_PROGRESS_INTERVAL,
    ENV_RESULT_KEY,
    ENV_SECRET_HEADERS,
    ENV_START_BARRIER,
    ORIGIN_JOB,
    ORIGIN_POD,
    ORIGIN_POD_UID,
    ORIGIN_RUN_UID,
    PROGRESS_KEY,
    RESULT_LIMIT_BYTES,
    START_KEY,
    progress_object_name,
    shard_object_name,
    shard_result_patch,
    start_object_name,
)
from .shardgate import ProgressWriter, ShardGate

EXIT_PLAN = 2
EXIT_PUBLISH = 4
PUBLISH_WITHIN_S = 300.0  # how long a shard keeps trying to publish its result, without a deadline
PUBLISH_AT_LEAST_S = 10.0  # and at least, however little of the Job's deadline is left


def publish_within_s(deadline_s: str | None, elapsed_s: float) -> float:
    """How long the shard keeps trying to publish its result through an outage: until the Job's
    ``activeDeadlineSeconds`` (counted from this process's start, a little after the Job's), when
    Kubernetes ends the pod anyway; a measured result is worth the whole wait. 300 s when the Job
    names no deadline (one made by an older operator)."""
    try:
        deadline = float(deadline_s) if deadline_s else None
    except ValueError:
        deadline = None
    if deadline is None or deadline <= 0:
        return PUBLISH_WITHIN_S
    return max(PUBLISH_AT_LEAST_S, deadline - elapsed_s)


def termination_message(message: str) -> None:
    """Write where the kubelet reads it: the remapped path locally, the standard path in a cluster."""
    path = Path(os.environ.get("MCP_TERMINATION_MESSAGE_PATH", "/dev/termination-log"))
    message = redact_text(message)
    with contextlib.suppress(OSError):
        path.write_text(message[:4096])
    print(message, file=sys.stderr)


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise PlanError(f"environment variable {name} is not set")
    return value


def secret_headers() -> dict[str, str]:
    """Header values the Job passed by reference, read now (``MCP_SECRET_HEADERS`` names them)."""
    refs = json.loads(os.environ.get(ENV_SECRET_HEADERS) or "{}")
    if not isinstance(refs, dict):
        raise PlanError(f"{ENV_SECRET_HEADERS} must be a JSON object")
    return {str(header): _env(str(var)) for header, var in refs.items()}


def with_headers(plan: RunPlan, headers: dict[str, str]) -> RunPlan:
    """The plan to run: the published one plus the header values from Secrets."""
    if not headers:
        return plan
    payload = plan.payload.model_copy(update={"headers": {**plan.payload.headers, **headers}})
    return plan.model_copy(update={"payload": payload})


def scrubbed(document: ResultDocument, published: RunPlan, secrets: list[str]) -> ResultDocument:
    """The document as it may leave the pod: the plan as shown (``RunPlan.shown``: no header
    value, every URL redacted by position) and free text without URL credentials or secret
    values."""

    def clean(text: str) -> str:
        for value in secrets:
            text = text.replace(value, REDACTED)
        return redact_text(text)

    document.plan = published.shown()
    document.notes = [clean(note) for note in document.notes]
    for level in document.levels:
        level.error_examples = {kind: clean(text) for kind, text in level.error_examples.items()}
    return document


def shard_gate(*, job: str, namespace: str, index: int, pod_uid: str, key: str) -> ShardGate:
    """Progress through this shard's own progress object, and the start barrier when the Job
    asks for it (``MCP_START_BARRIER``), reading the run's start object."""
    core = kube.core()

    def write(text: str) -> None:
        core.patch_namespaced_config_map(
            progress_object_name(job, index), namespace, {"data": {PROGRESS_KEY: text}}, _request_timeout=10
        )

    def read_starts() -> dict[int, int]:
        obj = core.read_namespaced_config_map(start_object_name(job), namespace, _request_timeout=10)
        return parse_starts((obj.data or {}).get(START_KEY), key.encode())

    interval = float(os.environ.get(ENV_PROGRESS_INTERVAL) or 2.0)
    return ShardGate(
        index=index,
        pod_uid=pod_uid,
        key=key.encode(),
        barrier=os.environ.get(ENV_START_BARRIER) in ("1", BARRIER_FIRST_LEVEL),
        first_level_only=os.environ.get(ENV_START_BARRIER) == BARRIER_FIRST_LEVEL,
        timeout_s=float(os.environ.get(ENV_BARRIER_TIMEOUT) or 600),
        writer=ProgressWriter(write, max(interval, 0.5)),
        read_starts=read_starts,
    )


WRITER_STOP_S = 15.0  # for the progress writer's last report once the result is published


def run_shard() -> int:
    started = time.monotonic()
    try:
        plan = RunPlan.from_dict(json.loads(_env(ENV_PLAN)), source=ENV_PLAN)
        uid, job, namespace = _env(ENV_BENCHMARK_UID), _env(ENV_JOB_NAME), _env(ENV_NAMESPACE)
        pod, pod_uid, key = _env(ENV_POD_NAME), _env(ENV_POD_UID), _env(ENV_RESULT_KEY)
        index = int(os.environ.get(ENV_COMPLETION_INDEX, "0"))
        plan = shard_plan(plan, index)  # its arrivals its own, not the other shards' instants
        headers = secret_headers()
        # the server's side the plan asks for (spec.observe), beside the shard's own GPU telemetry
        observers = plan_observers(plan)
    except (PlanError, ObserverArgError, ValueError) as exc:
        termination_message(f"shard cannot start: {exc}")
        return EXIT_PLAN
    # GPU telemetry on every shard: it says "unavailable" (and why) where there is no NVML
    gate = shard_gate(job=job, namespace=namespace, index=index, pod_uid=pod_uid, key=key)
    document = run_plan_sync(with_headers(plan, headers), observers=[TelemetryObserver(), *observers, gate])
    document = scrubbed(document, plan, [v for v in headers.values() if len(v) >= 4])
    document.shard_index = index
    document.origin = {ORIGIN_RUN_UID: uid, ORIGIN_JOB: job, ORIGIN_POD: pod, ORIGIN_POD_UID: pod_uid}
    text = dumps_within(document, RESULT_LIMIT_BYTES, key.encode())  # shrunk, not refused
    within_s = publish_within_s(os.environ.get(ENV_ACTIVE_DEADLINE), time.monotonic() - started)
    try:
        # a measured result outlives an API server that restarts meanwhile: retried until it lands
        kube.call_within(
            kube.core().patch_namespaced_config_map,
            shard_object_name(job, index),
            namespace,
            shard_result_patch(text),
            within_s=within_s,
        )
    except ApiException as exc:
        termination_message(f"shard {index} could not publish its result: {exc.status} {exc.reason}")
        return EXIT_PUBLISH
    except Exception as exc:  # still no API server when the run's deadline comes
        termination_message(
            f"shard {index} could not publish its result within {within_s:.0f}s: {type(exc).__name__}"
        )
        return EXIT_PUBLISH
    # the operator accepts the stored document only if this container's own log names it
    print(attestation_line(text), flush=True)
    completed = sum(level.completed for level in document.levels)
    failed = sum(level.failed for level in document.levels)
    termination_message(f"shard {index}: {completed} requests completed, {failed} failed; result published")
    if not gate.writer.close(timeout_s=WRITER_STOP_S):
        # the last progress report is still being retried: a daemon thread inside an HTTPS call
        # while the interpreter shuts down aborted the process (SIGABRT, exit -6, after an API
        # outage) and the Job ran the shard again; leave without finalizing instead
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
