"""The shard's side of the start barrier and of live progress: an ``mcp_bench`` start gate that
reports through the shard's own progress object and waits for each level's start time in the
run's start object (see ``barrier`` for the operator's side).

Reports are small, signed with the run's key, and written from a thread of their own (never on
the load loop), at most once per interval except when the state changes (waiting at a barrier,
running, finished), which is written at once so the barrier opens without delay. A write that
fails is tried again (a newer report replaces it), whatever the failure: a restarted API server
refuses a service account until its RBAC has synced, and a shard waiting at the barrier whose
"waiting" was lost would wait for ever. Progress is never part of the result.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from mcp_bench.api import (
    GateObserver,
    LevelMeta,
    LevelProgress,
    LevelResult,
    ResultDocument,
    RunPlan,
    sleep_until,
)

from .barrier import FINISHED, POLL_S, RUNNING, WAITING, sign, start_problem

RETRY_S = 1.0  # a failed write is tried again after this long, doubling while failures last
MAX_RETRY_S = 10.0


class ProgressWriter:
    """Keeps the newest report and writes it from a daemon thread: at most once per
    ``interval_s``, at once when it is marked urgent."""

    def __init__(self, write: Callable[[str], None], interval_s: float) -> None:
        self._write = write
        self.interval_s = interval_s
        self._cond = threading.Condition()
        self._latest: str | None = None
        self._urgent = False
        self._closed = False
        self._last = 0.0
        self.written = 0
        self.failures = 0
        self._failing = 0  # failures since the last write that landed
        self._thread = threading.Thread(target=self._run, name="progress-writer", daemon=True)
        self._thread.start()

    def offer(self, text: str, *, urgent: bool = False) -> None:
        with self._cond:
            self._latest = text
            self._urgent = self._urgent or urgent
            self._cond.notify()

    def close(self, timeout_s: float = 10.0) -> bool:
        """Write what is pending, then stop; whether the thread has stopped (a write still being
        retried through an API outage keeps it going past ``timeout_s``)."""
        with self._cond:
            self._closed = True
            self._urgent = True
            self._cond.notify()
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    due = self._last + self.interval_s - time.monotonic()
                    if self._latest is not None and (self._urgent or due <= 0):
                        break
                    if self._closed and self._latest is None:
                        return
                    self._cond.wait(None if self._latest is None else max(due, 0.01))
                text, self._latest, self._urgent = self._latest, None, False
            try:
                self._write(text)
                self.written += 1
                self._last = time.monotonic()
                self._failing = 0
            except Exception:  # the API server may be away or not ready: the same report again
                self.failures += 1
                self._failing += 1
                with self._cond:
                    if self._latest is None:  # unless a newer report replaced it
                        self._latest = text
                # the next attempt comes after RETRY_S (doubling while it fails), not a whole
                # interval: a shard waiting at the barrier offers nothing new, and the operator
                # must still learn that it waits
                wait = min(RETRY_S * 2 ** (self._failing - 1), MAX_RETRY_S)
                self._last = time.monotonic() - self.interval_s + wait


def eta_s(plan: RunPlan, level: int, levels: int, fraction: float, elapsed_s: float) -> float | None:
    """Seconds left in the run: the rest of this level (by its planned time, or as far as its
    pace shows when it ends by request count) and every later level at the same length."""
    stage = plan.stage
    planned = stage.warmup_s + stage.duration_s if stage.duration_s else None
    current = elapsed_s / fraction if fraction > 0.01 else planned
    if current is None:
        return None
    return max(0.0, current - elapsed_s) + max(0, levels - level - 1) * (planned or current)


class ShardGate(GateObserver):
    """Progress reports and, with ``barrier``, a wait for each level's common start time."""

    def __init__(
        self,
        *,
        index: int,
        pod_uid: str,
        key: bytes,
        barrier: bool,
        timeout_s: float,
        writer: ProgressWriter,
        read_starts: Callable[[], dict[int, int]],
        first_level_only: bool = False,
    ) -> None:
        self.index, self.pod_uid, self.key = index, pod_uid, key
        self.barrier, self.timeout_s = barrier, timeout_s
        self.first_level_only = first_level_only
        self.writer, self.read_starts = writer, read_starts
        self.levels = 0
        self.level = 0
        self.state = "starting"
        self.done = (0, 0, 0)  # sent, completed, failed over finished levels
        self.now = LevelProgress(0, 0, 0, 0.0, 0.0)
        self.eta: float | None = None
        self.waited: dict[int, int] = {}
        self.missed: list[int] = []
        self.refused: dict[int, str] = {}  # level -> a start refused (too far ahead)
        self.plan: RunPlan | None = None

    def _report(self, *, urgent: bool) -> None:
        sent, completed, failed = self.done
        elapsed = self.now.elapsed_s
        rate = (self.now.completed + self.now.failed) / elapsed if elapsed > 0 else 0.0
        body = {
            "shard": self.index,
            "podUid": self.pod_uid,
            "state": self.state,
            "level": self.level,
            "levels": self.levels,
            "sent": sent + self.now.sent,
            "completed": completed + self.now.completed,
            "errors": failed + self.now.failed,
            "inFlight": self.now.in_flight if self.state == RUNNING else 0,
            "rateRps": round(rate, 2) if self.state == RUNNING else 0.0,
            "etaSeconds": None if self.eta is None else round(self.eta, 1),
            "atMs": time.time_ns() // 1_000_000,
        }
        self.writer.offer(sign(body, self.key), urgent=urgent)

    async def run_started(self, plan: RunPlan) -> None:
        self.plan = plan
        self.levels = len(plan.levels.concurrency or plan.levels.rate or [])
        self.eta = eta_s(plan, 0, self.levels, 0.0, 0.0)
        self._report(urgent=True)

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self.level = meta.index
        self.now = LevelProgress(0, 0, 0, 0.0, 0.0)
        if plan.engine != "builtin":  # an external tool starts per level: wait before it
            await self.level_ready(plan, meta)

    async def level_ready(self, plan: RunPlan, meta: LevelMeta) -> None:
        waits = self.barrier and (meta.index == 0 or not self.first_level_only)
        if waits and meta.index not in self.waited and meta.index not in self.missed:
            self.state = WAITING
            self._report(urgent=True)
            start = await self._wait_for_start(meta.index)
            if start is None:
                self.missed.append(meta.index)
            else:
                await sleep_until(start)
                self.waited[meta.index] = start
        self.state = RUNNING
        self._report(urgent=True)

    async def _wait_for_start(self, level: int) -> int | None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                starts = await asyncio.to_thread(self.read_starts)
            except Exception:  # an API hiccup: look again
                starts = {}
            if level in starts:
                problem = start_problem(starts[level], time.time_ns())
                if problem is None:
                    return starts[level]
                # reported in the result (the first time), and never slept on
                self.refused.setdefault(level, f"level {level}: refused {problem}; still waiting")
            await asyncio.sleep(POLL_S)
        return None

    def level_progress(self, meta: LevelMeta, progress: LevelProgress) -> None:
        self.now = progress
        if self.plan is not None:
            self.eta = eta_s(self.plan, meta.index, self.levels, progress.fraction, progress.elapsed_s)
        self._report(urgent=False)

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        if result.index in self.waited:
            result.start_at_unix_ns = self.waited[result.index]
        sent, completed, failed = self.done
        self.done = (
            sent + result.sent,
            completed + result.completed,
            failed + result.failed + result.dropped,
        )
        self.now = LevelProgress(0, 0, 0, 0.0, 0.0)
        self.eta = (
            eta_s(plan, result.index + 1, self.levels, 0.0, 0.0) if result.index + 1 < self.levels else 0
        )

    async def run_finished(self, doc: ResultDocument) -> None:
        doc.notes.extend(self.refused.values())
        for level in self.missed:
            doc.notes.append(
                f"level {level}: no common start time within {self.timeout_s:g} s; this shard started alone"
            )
        self.state, self.level, self.eta = FINISHED, max(self.levels - 1, 0), 0.0
        self._report(urgent=True)
        await asyncio.to_thread(self.writer.close)
