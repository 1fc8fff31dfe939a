"""One drill, stage by stage: the stage's load, its faults at their offsets (each journaled in
status before it is applied, and reverted when its hold ends or the stage does), a sentinel
probe all along, and at the end the KPI board.

Every path reverts: the ``finally`` of ``run_drill`` reverts whatever the journal still shows
open, also when the drill is cancelled (abort, deletion) or a step raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes import client

from mcp_checks.api import (
    CheckOutcome,
    ConfigConsistencySpec,
    SentinelRecord,
    Verdict,
    run_config_consistency,
    run_sentinel,
    utc_now,
)

from ... import metrics
from ...api.drill import DrillSpec, FaultRecord, FaultSpec, Stage, StageLoad, StageSummary
from ...targets import join_url
from ...targets.guarded import check_hooks
from ..faults import FaultRefused, PlannedFault, inject_fault, plan_fault, revert_fault
from . import journal as jr
from .inplace import reloaded_in_place
from .kpi import FaultTiming, board, jump_points, refused_outcome
from .load import OnStart, StageFigures
from .measures import Measures
from .preflight import preflight
from .profile import expand
from .summary import ended, stage_summary, wire

log = logging.getLogger(__name__)
WriteStatus = Callable[[dict[str, Any]], Awaitable[None]]
Announce = Callable[[bool, str, str], None]  # (warning, reason, message): an event on the object
RECOVERY_KINDS = ("podKill", "zoneOutage", "nodeDrain", "scaleDown", "rolloutRestart", "chaosMesh")
HOT_UPDATE_TIMEOUT_S = 60.0


class StageLoader(Protocol):
    """Runs one stage's load: in the operator's pod (``load.LoadRunner``) or as shard Jobs
    (``shardload.ShardedStageLoader``)."""

    async def run(self, stage: str, load: StageLoad, base_url: str, on_start: OnStart) -> StageFigures: ...


@dataclass
class DrillContext:
    namespace: str
    base_url: str
    health_path: str
    api: client.ApiClient
    write_status: WriteStatus
    announce: Announce = lambda warning, reason, message: None


@dataclass
class DrillOutcome:
    outcomes: list[CheckOutcome]
    kpis: list[dict[str, str]]
    stages: list[StageSummary]
    journal: jr.Journal
    reverted: bool


@dataclass
class _State:
    """What the drill has written so far; every status write sends the whole of it."""

    stages: list[StageSummary]
    journal: jr.Journal = field(default_factory=list)
    refused: list[CheckOutcome] = field(default_factory=list)
    timings: list[FaultTiming] = field(default_factory=list)
    hot_updates: list[tuple[str, str, float | None]] = field(default_factory=list)  # id, what, seconds
    injected_at: dict[str, float] = field(default_factory=dict)
    reverted_at: dict[str, float] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Drill:
    def __init__(self, spec: DrillSpec, ctx: DrillContext, loads: StageLoader) -> None:
        self.spec = spec
        self.ctx = ctx
        self.loads = loads
        self.stages = expand(spec, ctx.health_path)
        self.state = _State([stage_summary(s, "Pending") for s in self.stages])
        self.sentinel = SentinelRecord()
        self.measures = Measures(spec, ctx.api, ctx.namespace)

    async def _write(self, **extra: Any) -> None:
        async with self.state.lock:
            await self.ctx.write_status(
                {"stages": [wire(s) for s in self.state.stages], "faults": self.state.journal[-64:], **extra}
            )

    async def run(self) -> DrillOutcome:
        url = join_url(self.ctx.base_url, self.ctx.health_path)
        refused = await preflight(url)
        if refused is not None:  # nothing injected, no stage run: the drill could prove nothing
            self.state.stages = ended(self.state.stages)
            await self._write(stage=f"0/{len(self.stages)}")
            return DrillOutcome([refused], [], self.state.stages, self.state.journal, reverted=True)
        stop = asyncio.Event()
        sentinel = asyncio.create_task(run_sentinel(url, self.sentinel, stop, dial=check_hooks()))
        self.measures.start()
        figures: list[tuple[str, StageFigures]] = []
        try:
            await self._write(stage=f"0/{len(self.stages)}", plan=[s.to_wire() for s in self.stages], kpis=[])
            for index, stage in enumerate(self.stages):
                started_at = utc_now()
                self.state.stages[index] = stage_summary(stage, "Running", started_at=started_at)
                await self._write(stage=f"{index + 1}/{len(self.stages)}")
                result = await self._stage(stage)
                if result is not None:
                    figures.append((stage.name, result))
                self.state.stages[index] = stage_summary(
                    stage, "Done", result, started_at=started_at, ended_at=utc_now()
                )
                await self._write()
        finally:
            stop.set()
            await asyncio.gather(sentinel, return_exceptions=True)
            await self.measures.stop()
            await self.revert_open()
        ok = sum(s.ok for s in self.sentinel.samples) + sum(f.completed for _, f in figures)
        total = len(self.sentinel.samples) + sum(f.completed + f.errors for _, f in figures)
        self._recoveries()
        rows = board(
            ok=ok,
            total=total,
            stages=figures,
            recoveries=self.state.timings,
            hot_updates=self.state.hot_updates,
            thresholds=self.spec.kpis,
            extra=self.measures.rows(),
        )
        jumped = {j.stage: j.offset_s for j in jump_points(figures, self.spec.kpis.p99_jump_factor)}
        for row in self.state.stages:
            if row.name in jumped:
                row.p99_jump_at_seconds = round(jumped[row.name], 2)
        return DrillOutcome(
            outcomes=[r.outcome() for r in rows] + self.state.refused,
            kpis=[r.to_wire() for r in rows],
            stages=self.state.stages,
            journal=self.state.journal,
            reverted=jr.all_reverted(self.state.journal),
        )

    def _recoveries(self) -> None:
        """One timing per fault: the outage it caused is the first failure from its injection
        until a recovery window after its revert (a failure later than that is not its doing)."""
        window = self.spec.kpis.recovery_window_seconds
        for entry in map(jr.record, self.state.journal):
            if entry.kind not in RECOVERY_KINDS or entry.id not in self.state.injected_at:
                continue
            since = self.state.injected_at[entry.id]
            until = self.state.reverted_at.get(entry.id, float("inf")) + window
            outage, recovery = self.sentinel.outage_recovery(since, until, window)
            self.state.timings.append(FaultTiming(entry.id, entry.stage, entry.kind, recovery, outage))

    async def _stage(self, stage: Stage) -> StageFigures | None:
        """The stage's load and its faults; the faults' offsets count from when the load starts
        (shard Jobs start seconds after they are created), or from now for a stage without load."""
        before = await self.measures.stage_starting(stage)
        length = (
            stage.load.duration_seconds
            if stage.load is not None
            else max((f.at_seconds + f.hold_seconds for f in stage.faults), default=0.0)
        )
        started: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        def load_started(at: float) -> None:
            if not started.done():
                started.set_result(at)

        load = None
        if stage.load is not None:
            load = asyncio.create_task(
                self.loads.run(stage.name, stage.load, self.ctx.base_url, load_started)
            )
        else:
            load_started(time.monotonic())
        faults = [
            asyncio.create_task(self._fault(stage, f"{stage.name}-{i}", fault, started, length))
            for i, fault in enumerate(stage.faults)
        ]
        try:
            result = await load if load is not None else None
            if result is not None:
                await self.measures.stage_loaded(stage, before, result)
            await asyncio.gather(*faults)
        finally:
            for task in faults:
                task.cancel()
            await asyncio.gather(*faults, return_exceptions=True)
        return result

    async def _fault(
        self,
        stage: Stage,
        fault_id: str,
        fault: FaultSpec,
        load_started: asyncio.Future[float],
        length: float,
    ) -> None:
        started = await asyncio.shield(load_started)
        await asyncio.sleep(max(0.0, started + fault.at_seconds - time.monotonic()))
        try:
            planned = await plan_fault(fault, self.ctx.namespace, self.spec.fault_policy, self.ctx.api)
        except FaultRefused as exc:
            self.state.journal = jr.skipped(
                self.state.journal,
                fault_id=fault_id,
                stage=stage.name,
                kind=fault.kind,
                message=f"{exc.reason}: {exc}",
                now=utc_now(),
            )
            self.state.refused.append(refused_outcome(fault_id, exc.reason, str(exc)))
            await self._write()
            return
        self.state.journal = jr.planned(
            self.state.journal,
            fault_id=fault_id,
            stage=stage.name,
            kind=fault.kind,
            target=planned.target,
            undo=planned.undo,
            now=utc_now(),
        )
        await self._write()  # journaled before anything is touched
        if self.spec.dry_run:
            self.state.journal = jr.updated(
                self.state.journal,
                fault_id,
                phase="Skipped",
                message=f"dry run: would {fault.kind} {planned.target}",
            )
            await self._write()
            return
        hold_until = started + (fault.at_seconds + fault.hold_seconds if fault.hold_seconds else length)
        if fault.kind == "etcdLeaderMove":  # API writes measured around it, stopped before the revert
            evidence = f"etcdLeaderMove {fault_id} in {stage.name}"
            async with self.measures.api_writes(evidence, str(planned.undo["configMap"])) as writes:
                writes.keep = await self._apply(stage, fault_id, fault, planned, hold_until)
            await self._revert(fault_id)
            return
        await self._apply(stage, fault_id, fault, planned, hold_until)
        await self._revert(fault_id)

    async def _apply(
        self, stage: Stage, fault_id: str, fault: FaultSpec, planned: PlannedFault, hold_until: float
    ) -> bool:
        """Inject, journal it, and hold it until ``hold_until`` (a timed fault: at least its
        ``holdSeconds`` after it is in); False when it was refused (and reverted at once)."""
        began = time.time()  # an outage can start while the injection is still going (nodesDown waits)
        try:
            message = await inject_fault(planned, self.ctx.api)
        except FaultRefused as exc:
            self.state.refused.append(refused_outcome(fault_id, exc.reason, str(exc)))
            await self._revert(fault_id, f"{exc.reason}: {exc}")
            return False
        except Exception as exc:  # half injected, perhaps: the journal's undo covers it
            reason = "FaultInjectionFailed"
            self.state.refused.append(refused_outcome(fault_id, reason, f"{type(exc).__name__}: {exc}"))
            await self._revert(fault_id, f"{reason}: {type(exc).__name__}: {exc}")
            return False
        self.state.injected_at[fault_id] = began
        if fault.hold_seconds:  # held for its full time once in, however long injecting took
            hold_until = max(hold_until, time.monotonic() + fault.hold_seconds)
        self.state.journal = jr.updated(
            self.state.journal, fault_id, phase="Injected", injected_at=utc_now(), message=message
        )
        self.ctx.announce(False, "FaultInjected", f"{fault.kind} {fault_id} in {stage.name}: {message}")
        await self._write()
        if fault.kind == "configHotUpdate":
            how = "rollout" if fault.rollout else "in place"
            label = f"configHotUpdate {fault_id} in {stage.name} ({how})"
            self.state.hot_updates.append((fault_id, label, await self._hot_update(fault)))
        await asyncio.sleep(max(0.0, hold_until - time.monotonic()))
        return True

    async def _hot_update(self, fault: FaultSpec) -> float | None:
        """Seconds from the patch until every ready pod of the workload runs the new config:
        rolled out (the config-consistency check passes) or reloaded in place (``inplace``)."""
        assert fault.config_map is not None and fault.workload is not None
        if not fault.rollout:
            return await reloaded_in_place(fault, self.ctx.namespace, self.ctx.base_url, self.ctx.api)
        spec = ConfigConsistencySpec(
            namespace=self.ctx.namespace,
            workload=fault.workload,
            config_maps=(fault.config_map,),
            annotation=fault.annotation,
            timeout_s=5.0,
        )
        started = time.monotonic()
        while time.monotonic() - started < HOT_UPDATE_TIMEOUT_S:
            outcome = await run_config_consistency(spec, self.ctx.api)
            if outcome.outcome == Verdict.PASS:
                return time.monotonic() - started
            await asyncio.sleep(0.1)
        return None

    async def _revert(self, fault_id: str, why: str = "") -> None:
        entry = next(e for e in map(jr.record, self.state.journal) if e.id == fault_id)
        if entry.phase not in jr.OPEN_PHASES:
            return
        try:
            message = await revert_with_backoff(entry, self.ctx.api, REVERT_BACKOFF_S)
        except Exception as exc:  # recorded in the journal and the FaultsReverted condition
            failed = f"{type(exc).__name__}: {exc}"
            self.ctx.announce(True, "RevertFailed", f"{entry.kind} {fault_id}: {failed}")
            self.state.journal = jr.updated(
                self.state.journal, fault_id, phase="RevertFailed", message=failed
            )
        else:
            self.state.reverted_at[fault_id] = time.time()
            done = "; ".join(x for x in (why, message) if x)
            self.ctx.announce(False, "FaultReverted", f"{entry.kind} {fault_id}: {done}")
            self.state.journal = jr.updated(
                self.state.journal, fault_id, phase="Reverted", reverted_at=utc_now(), message=done
            )
        await self._write()

    async def revert_open(self) -> None:
        """Revert whatever is still open; shielded so a cancellation cannot stop it half way."""
        for entry in map(jr.record, jr.open_entries(self.state.journal)):
            await asyncio.shield(self._revert(entry.id))


REVERT_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # a drill's own revert: about 15 s of retries


async def revert_with_backoff(entry: FaultRecord, api: client.ApiClient, backoff_s: tuple[float, ...]) -> str:
    """Revert one journal entry, retrying with backoff (a transient API error must not leave a
    fault in place); the last failure is raised. Every failed try is counted."""
    for attempt, delay in enumerate((*backoff_s, None)):
        try:
            return await revert_fault(entry.kind, jr.undo_of(entry), api)
        except Exception:
            metrics.FAULT_REVERT_FAILURES.labels(entry.kind).inc()
            log.warning("reverting %s failed (try %d)", entry.id, attempt + 1, exc_info=True)
            if delay is None:
                raise
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


async def replay_journal(
    journal: jr.Journal, api: client.ApiClient, backoff_s: tuple[float, ...] = ()
) -> jr.Journal:
    """Revert what a journal left open: an operator that died mid-drill, a deleted resource, a
    revert that failed before (retried each time this runs)."""
    for entry in map(jr.record, jr.open_entries(journal)):
        try:
            message = await revert_with_backoff(entry, api, backoff_s)
        except Exception as exc:
            journal = jr.updated(
                journal,
                entry.id,
                phase="RevertFailed",
                revert_tries=(entry.revert_tries or 0) + 1,
                message=f"{type(exc).__name__}: {exc}",
            )
        else:
            journal = jr.updated(
                journal, entry.id, phase="Reverted", reverted_at=utc_now(), message=f"replayed: {message}"
            )
    return journal
