"""The probe driver: a run observer that answers the probes at rest before the first level and
again during each level, through a protocol client of its own (so the load's connections and
figures are untouched), and writes each level's consistency figures into its result.

When a level's probing begins: the built-in engine in one process reports progress, so the
first round waits until the level has sent load (at most ``LOAD_WAIT_S``: the window opened at
``level_ready``, and progress ticks come late on a busy host), then one ``interval_s``; with worker processes
or an external engine (no progress reaches this process) it begins one ``interval_s`` after the
level's window opens (``level_ready``) or, for Locust and k6, after the level starts. A round
still in flight when the level ends is awaited, its answers counted with the level. A probe
client that cannot open leaves every level ``NoData`` with the reason; the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from mcp_bench.consistency.compare import Comparison, compare_answers, counts
from mcp_bench.consistency.probes import build_probes
from mcp_bench.engines.gate import GateObserver, LevelProgress
from mcp_bench.plan import Consistency, RunPlan
from mcp_bench.protocols import protocol_factory
from mcp_bench.records import ProtocolClient, RequestPayload, RequestRecord
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.consistency import FOUND, judge
from mcp_bench.results.document import LevelResult

LOAD_WAIT_S = 0.5  # the load runs by then; a progress tick that comes later does not hold probing


@dataclass
class _Level:
    """One level's probing: its task, the signals that start and stop it, what came back."""

    index: int
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    sent: int = 0
    failed: int = 0
    no_baseline: int = 0
    comparisons: list[Comparison] = field(default_factory=list)
    error: str | None = None  # the first failure's detail


class ConsistencyObserver(GateObserver):
    """Sends the plan's consistency probes and judges each level's answers (see the module)."""

    def __init__(self, plan: RunPlan) -> None:
        if plan.consistency is None:
            raise ValueError("the plan has no consistency section")
        self.cfg: Consistency = plan.consistency
        self.client: ProtocolClient | None = None
        self.probes: list[RequestPayload] = []
        self.rest: list[dict[str, Any] | None] = []  # each probe's first at-rest answer
        self.rest_figures: dict[str, Any] | None = None
        self.unstable: str | None = None
        self.rest_error: str | None = None  # the first at-rest failure's detail
        self._level: _Level | None = None

    async def run_started(self, plan: RunPlan) -> None:
        try:
            client = protocol_factory(plan.backend)(plan, self.cfg.probes)
            await client.open()
            self.client = client
            self.probes = build_probes(plan, client, self.cfg)
        except Exception as exc:  # the probes must never stop the run; every level says why
            self.unstable = f"the probe client could not start: {type(exc).__name__}: {exc}"
            return
        try:
            rounds = [await self._round() for _ in range(self.cfg.rest_repeats)]
        except Exception as exc:
            self.unstable = f"the probes could not be sent at rest: {type(exc).__name__}: {exc}"
            return
        self.rest_error = next((r.error_detail for a in rounds for r in a if not r.ok), None)
        self.rest = [
            next((r.output for r in answers if r.ok and r.output is not None), None)
            for answers in zip(*rounds, strict=True)
        ]
        later = [
            compare_answers(ref, r.output, self.cfg.l2)
            for ref, answers in zip(self.rest, zip(*rounds, strict=True), strict=True)
            if ref is not None
            for r in answers
            if r.ok and r.output is not None and r.output is not ref
        ]
        sent = len(self.probes) * self.cfg.rest_repeats
        failed = sum(1 for answers in rounds for r in answers if not r.ok)
        self.rest_figures = judge(counts(later, probes=sent, failed=failed), self.cfg)
        if self.rest_figures["state"] == FOUND:
            self.unstable = (
                f"at rest the probes' repeated answers already differ ({self.rest_figures['reason']})"
            )

    async def _round(self) -> list[RequestRecord]:
        client = self.client
        assert client is not None
        return list(await asyncio.gather(*(client.send(p) for p in self.probes)))

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self._level = _Level(meta.index)
        if plan.engine != "builtin":  # an external tool: no level_ready, no progress
            self._start(wait_for_load=False)

    async def level_ready(self, plan: RunPlan, meta: LevelMeta) -> None:
        self._start(wait_for_load=plan.engine == "builtin" and plan.workers == 1)

    def level_progress(self, meta: LevelMeta, progress: LevelProgress) -> None:
        lv = self._level
        if lv is not None and lv.index == meta.index and progress.sent > 0:
            lv.loaded.set()

    def _start(self, *, wait_for_load: bool) -> None:
        lv = self._level
        if lv is None or lv.task is not None or self.client is None or self.unstable is not None:
            return
        lv.task = asyncio.get_running_loop().create_task(self._probe_level(lv, wait_for_load))

    async def _probe_level(self, lv: _Level, wait_for_load: bool) -> None:
        if wait_for_load:
            stop = asyncio.ensure_future(lv.stop.wait())
            loaded = asyncio.ensure_future(lv.loaded.wait())
            await asyncio.wait({stop, loaded}, timeout=LOAD_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
            for fut in (stop, loaded):
                fut.cancel()
        rounds = 0
        while rounds < self.cfg.max_rounds and not lv.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lv.stop.wait(), self.cfg.interval_s)
                return
            try:
                answers = await self._round()
            except Exception as exc:  # a broken probe client ends the level's probing, not the run
                lv.error = lv.error or f"{type(exc).__name__}: {exc}"
                return
            self._take(lv, answers)
            rounds += 1

    def _take(self, lv: _Level, answers: list[RequestRecord]) -> None:
        for ref, rec in zip(self.rest, answers, strict=True):
            lv.sent += 1
            if not rec.ok or rec.output is None:
                lv.failed += 1
                lv.error = lv.error or rec.error_detail or "an answer without content"
            elif ref is None:
                lv.no_baseline += 1
            else:
                lv.comparisons.append(compare_answers(ref, rec.output, self.cfg.l2))

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        lv = self._level
        self._level = None
        if lv is None or lv.index != result.index:
            return
        lv.stop.set()
        if lv.task is not None:
            await lv.task  # a round in flight was sent under load: its answers count
        figures = counts(
            lv.comparisons,
            probes=lv.sent,
            failed=lv.failed,
            no_baseline=lv.no_baseline,
            unstable=self.unstable,
            error=lv.error or (self.rest_error if lv.no_baseline else None),
        )
        result.consistency = judge(figures, self.cfg)

    async def run_finished(self, doc: Any) -> None:
        if self.client is not None:
            await self.client.close()
            self.client = None
