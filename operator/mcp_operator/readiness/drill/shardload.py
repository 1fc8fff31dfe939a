"""A stage's load as an MCPBenchmark of its own (``spec.drill.shards``): shard Jobs spread over
the nodes run the stage through the same engine, signed results and start barrier as any
benchmark, and the drill only orchestrates. The benchmark is owned by the gate (deleted with
it) and named for the gate and the stage; the next drill of the gate replaces it, so the last
drill's evidence stays readable (``kubectl get mcpb``, ``mcp-operator report``).

The stage's plan (``stageplan.stage_plan``) is the benchmark's load: its windows are the
benchmark's levels, run back to back, each shard sending its share from arrivals of its own
(``mcp_bench``'s ``shard_plan``). The barrier holds only the first level
(``startBarrier.everyLevel: false``), and its start time, which the operator writes, is when the
drill's faults count their offsets from. The benchmark package is used through its public entry
(``benchmark.public``).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mcp_bench.api import RunPlan
from mcp_common.tolerant import tolerant

from ... import kube
from ...api.benchmark import PLURAL as BENCHMARK_PLURAL
from ...api.benchmark import MCPBenchmarkStatus
from ...api.common import API_VERSION, GROUP, VERSION
from ...api.drill import DrillShards, StageLoad
from ...api.load import MAX_LEVELS
from ...api.readiness import KIND as READINESS_KIND
from ...benchmark.public import first_level_start, read_report
from ...children import MAX_OBJECT_NAME, bounded_name, dns_label, owner_reference
from ...conditions import condition
from .load import OnStart, StageFigures, figures
from .stageplan import stage_plan

LABEL_DRILL_OF = "mcp2026.io/drill-of"  # the gate whose drill a benchmark loads a stage of
LABEL_STAGE = "mcp2026.io/drill-stage"
POLL_S = 0.5
# the levels after the first are not held at a barrier: shards that drift apart by a little still
# count as one cluster-wide window
MIN_OVERLAP = 0.5
COLLECT_SLACK_S = 120.0  # after the load's planned end: the shards publish, the operator merges
TERMINAL_PHASES = ("Succeeded", "Failed", "Invalid")


class StageLoadFailed(RuntimeError):
    """The stage's benchmark ended without figures (its Ready condition says why)."""


def stage_benchmark_name(gate: str, stage: str) -> str:
    return bounded_name(gate, MAX_OBJECT_NAME, "-" + dns_label(stage, 40))


def stage_benchmark(
    *,
    gate: str,
    gate_uid: str,
    namespace: str,
    stage: str,
    load: StageLoad,
    base_url: str,
    shards: DrillShards,
) -> dict[str, Any]:
    """The MCPBenchmark that runs one stage's load: its plan's levels (at most the levels a
    benchmark takes, longer windows then), each shard its share."""
    plan = stage_plan(load, base_url, most=MAX_LEVELS)
    target: dict[str, Any] = {"url": base_url, "path": load.path, "backend": plan.backend}
    workload: dict[str, Any] = {}
    if load.classes:  # a mix: each class its own protocol and path
        target = {"url": base_url, "backend": plan.backend}
        workload = {
            "workload": {"classes": [c.model_dump(by_alias=True, exclude_none=True) for c in load.classes]}
        }
    return {
        "apiVersion": API_VERSION,
        "kind": "MCPBenchmark",
        "metadata": {
            "name": stage_benchmark_name(gate, stage),
            "namespace": namespace,
            "labels": {LABEL_DRILL_OF: bounded_name(gate, 63), LABEL_STAGE: dns_label(stage, 63)},
            "ownerReferences": [owner_reference(READINESS_KIND, gate, gate_uid)],
        },
        "spec": {
            "target": target,
            **workload,
            "load": shard_load(plan, shards.count),
            "shards": shards.count,
            "runner": shards.runner.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "startBarrier": {
                "everyLevel": False,
                "minOverlap": MIN_OVERLAP,
                # a whole number of seconds, as the benchmark's schema takes it (a float, even
                # 120.0, is refused by the API server), never shorter than the drill's
                "timeoutSeconds": math.ceil(shards.start_timeout_seconds),
            },
        },
    }


def shard_load(plan: RunPlan, count: int) -> dict[str, Any]:
    """A benchmark's ``spec.load`` whose ``count`` shards together send the plan's load: each its
    share of the rate (its arrivals as the plan's), or of the concurrency (rounded up)."""
    levels = plan.levels
    share: dict[str, Any] = (
        {
            "rate": [round(rate / count, 6) for rate in levels.rate],
            "arrival": levels.arrival,
            "overload": levels.overload,
        }
        if levels.rate is not None
        else {"concurrency": [max(1, math.ceil(c / count)) for c in levels.concurrency or ()]}
    )
    return {
        **share,
        "durationSeconds": plan.stage.duration_s,
        "warmupSeconds": plan.stage.warmup_s,
        "requestTimeoutSeconds": plan.request_timeout_s,
    }


def monotonic_of(unix_ns: int) -> float:
    return time.monotonic() + (unix_ns / 1e9 - time.time())


class ShardedStageLoader:
    """Runs each stage's load as the MCPBenchmark ``stage_benchmark`` describes and reads its
    merged, verified document back into the stage's figures."""

    def __init__(
        self, *, gate: str, gate_uid: str, namespace: str, shards: DrillShards, api: client.ApiClient
    ) -> None:
        self.gate, self.gate_uid, self.namespace = gate, gate_uid, namespace
        self.shards, self.api = shards, api

    async def run(self, stage: str, load: StageLoad, base_url: str, on_start: OnStart) -> StageFigures:
        body = stage_benchmark(
            gate=self.gate,
            gate_uid=self.gate_uid,
            namespace=self.namespace,
            stage=stage,
            load=load,
            base_url=base_url,
            shards=self.shards,
        )
        name = body["metadata"]["name"]
        await self._replace(name, body)
        started = await self._wait_for_start(name, time.monotonic() + self.shards.start_timeout_seconds)
        on_start(started)
        status = await self._wait_until_done(name, started + load.duration_seconds + COLLECT_SLACK_S)
        if status.phase != "Succeeded":
            raise StageLoadFailed(f"MCPBenchmark {self.namespace}/{name}: {_ready_message(status)}")
        doc, _, _ = await asyncio.to_thread(read_report, name, self.namespace, self.api)
        shown = f"MCPBenchmark {name}, {self.shards.count} shard(s)"
        return figures(doc, load, source=shown)

    async def _get(self, name: str) -> MCPBenchmarkStatus | None:
        """The benchmark's status, None when it is not there."""
        try:
            obj: dict[str, Any] = await kube.call(
                kube.custom().get_namespaced_custom_object,
                GROUP,
                VERSION,
                self.namespace,
                BENCHMARK_PLURAL,
                name,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return tolerant(MCPBenchmarkStatus, obj.get("status") or {})

    async def _replace(self, name: str, body: dict[str, Any]) -> None:
        """The previous drill's benchmark of this stage goes (its Job and results with it), then
        this one is created."""
        custom = kube.custom()
        try:
            await kube.call(
                custom.delete_namespaced_custom_object,
                GROUP,
                VERSION,
                self.namespace,
                BENCHMARK_PLURAL,
                name,
                body=client.V1DeleteOptions(propagation_policy="Foreground"),
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
        deadline = time.monotonic() + 60
        while await self._get(name) is not None:
            if time.monotonic() > deadline:
                raise StageLoadFailed(
                    f"MCPBenchmark {self.namespace}/{name} of the previous drill is not gone"
                )
            await asyncio.sleep(POLL_S)
        await kube.call(
            custom.create_namespaced_custom_object, GROUP, VERSION, self.namespace, BENCHMARK_PLURAL, body
        )

    async def _wait_for_start(self, name: str, deadline: float) -> float:
        """When the first level starts, as the operator wrote it into the run's start object."""
        while time.monotonic() < deadline:
            status = await self._get(name) or MCPBenchmarkStatus()
            if status.phase in TERMINAL_PHASES:
                raise StageLoadFailed(f"MCPBenchmark {self.namespace}/{name}: {_ready_message(status)}")
            if status.job_name:
                start = await first_level_start(self.namespace, status.job_name)
                if start is not None:
                    return monotonic_of(start)
            await asyncio.sleep(POLL_S)
        raise StageLoadFailed(
            f"MCPBenchmark {self.namespace}/{name}: its shards did not start within "
            f"{self.shards.start_timeout_seconds:g} s (spec.drill.shards.startTimeoutSeconds; "
            f"kubectl get pods -l job-name)"
        )

    async def _wait_until_done(self, name: str, deadline: float) -> MCPBenchmarkStatus:
        while True:
            status = await self._get(name)
            if status is None:
                raise StageLoadFailed(f"MCPBenchmark {self.namespace}/{name} was deleted during the stage")
            if status.phase in TERMINAL_PHASES:
                return status
            if time.monotonic() > deadline:
                raise StageLoadFailed(
                    f"MCPBenchmark {self.namespace}/{name} has no result {COLLECT_SLACK_S:g} s after "
                    f"its load's planned end: {_ready_message(status)}"
                )
            await asyncio.sleep(POLL_S)


def _ready_message(status: MCPBenchmarkStatus) -> str:
    ready = condition(status.conditions, "Ready")
    return f"{ready.reason}: {ready.message}" if ready else f"phase {status.phase or 'unknown'}"
