"""A stage's load as an MCPBenchmark of its own (``spec.drill.shards``): shard Jobs spread over
the nodes run the stage through the same engine, signed results and start barrier as any
benchmark, and the drill only orchestrates. The benchmark is owned by the gate (deleted with
it) and named for the gate and the stage; the next drill of the gate replaces it, so the last
drill's evidence stays readable (``kubectl get mcpb``, ``mcp-operator report``).

The stage's windows are the benchmark's levels, run back to back: the barrier holds only the
first (``startBarrier.everyLevel: false``), and its start time, which the operator writes, is
when the drill's faults count their offsets from. Each shard sends its share of the rate.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.benchmark import MAX_LEVELS
from ...api.benchmark import PLURAL as BENCHMARK_PLURAL
from ...api.common import API_VERSION, GROUP, VERSION
from ...api.drill import DrillShards, StageLoad
from ...api.readiness import KIND as READINESS_KIND
from ...benchmark.barrier import parse_starts
from ...benchmark.contract import START_KEY, start_object_name
from ...benchmark.reconcile import read_run_key
from ...benchmark.report import read_report
from ...children import MAX_OBJECT_NAME, bounded_name, dns_label, owner_reference
from .load import OnStart, StageFigures, figures, window_count

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
    """The MCPBenchmark that runs one stage's load: one level per window (at most the levels a
    benchmark takes, longer windows then), each shard its share."""
    windows, window_s = window_count(load, most=MAX_LEVELS)
    levels: dict[str, Any]
    if load.rate is not None:
        share = round(load.rate / shards.count, 6)
        levels = {"rate": [share] * windows, "arrival": "poisson", "overload": "drop"}
    else:
        assert load.concurrency is not None
        levels = {"concurrency": [max(1, math.ceil(load.concurrency / shards.count))] * windows}
    target: dict[str, Any] = {"url": base_url, "path": load.path, "backend": "http"}
    workload: dict[str, Any] = {}
    if load.classes:  # a mix: each class its own protocol and path
        target = {"url": base_url, "backend": "mix"}
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
            "load": {
                **levels,
                "durationSeconds": window_s,
                "warmupSeconds": 0,
                "requestTimeoutSeconds": 5,
            },
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
        obj = await self._wait_until_done(name, started + load.duration_seconds + COLLECT_SLACK_S)
        status = obj.get("status") or {}
        if status.get("phase") != "Succeeded":
            raise StageLoadFailed(f"MCPBenchmark {self.namespace}/{name}: {_ready_message(obj)}")
        doc, _, _ = await asyncio.to_thread(read_report, name, self.namespace, self.api)
        shown = f"MCPBenchmark {name}, {self.shards.count} shard(s)"
        return figures(doc, load, source=shown)

    async def _get(self, name: str) -> dict[str, Any] | None:
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
        return obj

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
            obj = await self._get(name)
            status = (obj or {}).get("status") or {}
            if status.get("phase") in TERMINAL_PHASES:
                raise StageLoadFailed(f"MCPBenchmark {self.namespace}/{name}: {_ready_message(obj or {})}")
            job = str(status.get("jobName") or "")
            if job:
                start = await self._first_start(job)
                if start is not None:
                    return monotonic_of(start)
            await asyncio.sleep(POLL_S)
        raise StageLoadFailed(
            f"MCPBenchmark {self.namespace}/{name}: its shards did not start within "
            f"{self.shards.start_timeout_seconds:g} s (spec.drill.shards.startTimeoutSeconds; "
            f"kubectl get pods -l job-name)"
        )

    async def _first_start(self, job: str) -> int | None:
        try:
            start = await kube.call(
                kube.core().read_namespaced_config_map, start_object_name(job), self.namespace
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        key = await read_run_key(self.namespace, job)
        return parse_starts((start.data or {}).get(START_KEY), key).get(0)

    async def _wait_until_done(self, name: str, deadline: float) -> dict[str, Any]:
        while True:
            obj = await self._get(name)
            if obj is None:
                raise StageLoadFailed(f"MCPBenchmark {self.namespace}/{name} was deleted during the stage")
            if ((obj.get("status") or {}).get("phase")) in TERMINAL_PHASES:
                return obj
            if time.monotonic() > deadline:
                raise StageLoadFailed(
                    f"MCPBenchmark {self.namespace}/{name} has no result {COLLECT_SLACK_S:g} s after "
                    f"its load's planned end: {_ready_message(obj)}"
                )
            await asyncio.sleep(POLL_S)


def _ready_message(obj: dict[str, Any]) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return f"{cond.get('reason', '')}: {cond.get('message', '')}"
    return f"phase {(obj.get('status') or {}).get('phase', 'unknown')}"
