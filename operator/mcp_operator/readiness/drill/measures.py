"""What a drill measures besides its sentinel probe and its load, gathered in one place so the
orchestrator only says when: the target's request counter around each stage's load (retry
amplification), the autoscaler and the workload's pods all along (autoscaler lag), and API
writes around a control-plane fault (write outage). Each ends as KPI rows."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from kubernetes import client

from ...api.drill import DrillSpec, Stage
from . import autoscaling, retries, writeprobe
from .kpi import KpiResult
from .load import StageFigures

BASELINE_WRITES_S = 0.5  # writes before the fault, so that the record starts healthy


class Measures:
    def __init__(self, spec: DrillSpec, api: client.ApiClient, namespace: str) -> None:
        self.spec, self.api, self.namespace = spec, api, namespace
        self.requests: list[retries.StageRequests] = []
        self.loads: list[tuple[str, float, float]] = []  # (stage, started, load)
        self.scale = autoscaling.ScaleRecord()
        self.writes: list[writeprobe.FaultWrites] = []
        self._stop = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.spec.autoscaling is not None:
            self._watcher = asyncio.create_task(
                autoscaling.watch(
                    self.api, self.namespace, self.spec.autoscaling.workload, self.scale, self._stop
                )
            )

    async def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            await asyncio.gather(self._watcher, return_exceptions=True)

    async def stage_starting(self, stage: Stage) -> retries.Reading | None:
        """Note when and how hard the stage loads; read the server's count before its load."""
        if stage.load is None:
            return None
        level = stage.load.rate if stage.load.rate is not None else float(stage.load.concurrency or 0)
        self.loads.append((stage.name, time.time(), level))
        if self.spec.server_requests is None:
            return None
        return await retries.read_requests(self.spec.server_requests)

    async def stage_loaded(self, stage: Stage, before: retries.Reading | None, figures: StageFigures) -> None:
        if self.spec.server_requests is None or before is None:
            return
        after = await retries.read_requests(self.spec.server_requests)
        faults = [f"{f.kind} at {f.at_seconds:g} s" for f in stage.faults]
        self.requests.append(
            retries.stage_requests(stage.name, before, after, figures.sent, figures.completed, faults)
        )

    @contextlib.asynccontextmanager
    async def api_writes(self, evidence: str, config_map: str) -> AsyncIterator[writeprobe.WriteRecord]:
        """API writes from just before the fault until the block ends (the fault's hold)."""
        record, stop = writeprobe.WriteRecord(), asyncio.Event()
        task = asyncio.create_task(
            writeprobe.run_write_probe(self.api, self.namespace, config_map, record, stop)
        )
        try:
            await asyncio.sleep(BASELINE_WRITES_S)
            yield record
        finally:
            stop.set()
            await asyncio.gather(task, return_exceptions=True)
            if record.keep:
                self.writes.append(writeprobe.FaultWrites(evidence, tuple(record.writes)))

    def rows(self) -> list[KpiResult]:
        t = self.spec.kpis
        rows: list[KpiResult | None] = [retries.amplification_kpi(self.requests, t)]
        if self.spec.autoscaling is not None:
            rises = autoscaling.load_rises(self.loads)
            rows += autoscaling.hpa_kpis(self.scale.samples, rises, self.spec.autoscaling.workload, t)
        rows.append(writeprobe.write_outage_kpi(self.writes, t))
        return [row for row in rows if row is not None]
