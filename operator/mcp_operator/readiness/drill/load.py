"""A stage's load, run by the project's engine in a process of its own (the stage's plan,
``stageplan.stage_plan``), and read back into the stage's figures: its windows (when within the
stage P99 jumps) and its exact percentiles (their histograms added up)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcp_bench.api import ENV as DIAL_GUARD_ENV
from mcp_bench.api import LatencyHistogram, ResultDocument, loads_document

from ...api.drill import StageLoad
from ...targets.guarded import rule
from .stageplan import requested, stage_plan

OnStart = Callable[[float], None]  # when a stage's load started, on the monotonic clock


@dataclass(frozen=True)
class WindowFigures:
    offset_s: float  # from the stage's start
    p99_ms: float | None
    completed: int
    errors: int  # requests sent that failed
    dropped: int = 0  # arrivals the client never sent (its in-flight cap was reached)
    # open loop: P99 from the actual send, without the client's own lateness (None: closed loop,
    # where p99_ms already is that)
    service_p99_ms: float | None = None
    client_busy: bool = False  # the window's client passed its bound (CPU share or schedule lag)

    @property
    def requests(self) -> int:
        return self.completed + self.errors


@dataclass(frozen=True)
class ClassFigures:
    """One request class of a mix over the whole stage."""

    name: str
    completed: int
    errors: int
    p50_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True)
class StageFigures:
    """``errors`` are requests that failed; ``dropped`` arrivals never reached the service and are
    no evidence about it either way; ``client_bound`` says why the load generator itself was the
    limit (its process near a full core, or its schedule lagging)."""

    requested: str
    achieved_rps: float | None
    p50_ms: float | None
    p99_ms: float | None
    completed: int
    errors: int
    windows: tuple[WindowFigures, ...]
    sent: int = 0  # requests the clients sent (completed or failed; dropped ones never left)
    dropped: int = 0
    client_bound: tuple[str, ...] = ()
    source: str = ""  # what generated the load: empty for the operator's own process
    classes: tuple[ClassFigures, ...] = ()
    service_p99_ms: float | None = None  # open loop: the stage's P99 from the actual send
    planned_requests: float | None = None  # open loop: the arrivals the plan expects (rate x time)

    @property
    def requests(self) -> int:
        return self.completed + self.errors


def figures(doc: ResultDocument, load: StageLoad, source: str = "") -> StageFigures:
    total, sent_total = LatencyHistogram(), LatencyHistogram()
    windows = []
    offset = 0.0
    window_s = load.duration_seconds / max(1, len(doc.levels))
    completed = errors = sent = dropped = 0
    bound: list[str] = []
    for level in doc.levels:
        metric = "e2e_from_schedule" if level.mode == "open" else "e2e"
        hist = level.histogram(metric) or level.histogram("e2e")
        if hist is not None:
            total.merge(hist)
        p99 = hist.percentile_ms(99) if hist and hist.count else None
        from_send = level.histogram("e2e") if level.mode == "open" else None
        if from_send is not None:
            sent_total.merge(from_send)
        service_p99 = from_send.percentile_ms(99) if from_send and from_send.count else None
        windows.append(
            WindowFigures(
                offset,
                p99,
                level.completed,
                level.failed,
                level.dropped,
                service_p99_ms=service_p99,
                client_busy=bool(level.client_bound),
            )
        )
        completed += level.completed
        errors += level.failed
        dropped += level.dropped
        sent += level.completed + level.failed
        bound += [f"at {offset:.0f} s: {reason}" for reason in level.client_bound or []]
        offset += window_s
    achieved = completed / load.duration_seconds if load.duration_seconds else None
    classes = class_figures(doc)
    return StageFigures(
        requested=requested(load),
        achieved_rps=achieved,
        p50_ms=total.percentile_ms(50) if total.count else None,
        p99_ms=total.percentile_ms(99) if total.count else None,
        completed=completed,
        errors=errors,
        windows=tuple(windows),
        sent=sent,
        dropped=dropped,
        client_bound=tuple(bound),
        source=source,
        classes=classes,
        service_p99_ms=sent_total.percentile_ms(99) if sent_total.count else None,
        planned_requests=None if load.rate is None else load.rate * load.duration_seconds,
    )


def class_figures(doc: ResultDocument) -> tuple[ClassFigures, ...]:
    """Each request class over every window of the stage (histograms merged exactly)."""
    totals: dict[str, tuple[int, int, LatencyHistogram]] = {}
    for level in doc.levels:
        metric = "e2e_from_schedule" if level.mode == "open" else "e2e"
        for name, row in ((level.breakdown or {}).get("class") or {}).items():
            completed, errors, hist = totals.get(name, (0, 0, LatencyHistogram()))
            part = row.histogram(metric) or row.histogram("e2e")
            if part is not None:
                hist.merge(part)
            totals[name] = (completed + row.completed, errors + row.failed, hist)
    return tuple(
        ClassFigures(
            name,
            completed,
            errors,
            hist.percentile_ms(50) if hist.count else None,
            hist.percentile_ms(99) if hist.count else None,
        )
        for name, (completed, errors, hist) in totals.items()
    )


class LoadRunner:
    """Each stage's load as an ``mcp-bench run`` process of its own: its own event loop and core,
    so the operator's work does not bend the figures, and killed at once when the drill is
    cancelled (a pool worker would go on loading the target after an abort)."""

    def __init__(self) -> None:
        self._running: set[asyncio.subprocess.Process] = set()

    async def run(self, stage: str, load: StageLoad, base_url: str, on_start: OnStart) -> StageFigures:
        """``on_start``: told when the load starts (the process is spawned), the time the
        stage's faults count from."""
        with tempfile.TemporaryDirectory(prefix="mcp-drill-") as work:
            plan, out = Path(work) / "plan.json", Path(work) / "result.json"
            plan.write_text(stage_plan(load, base_url).model_dump_json(exclude_unset=True), encoding="utf-8")
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "mcp_bench.cli",
                "run",
                "--plan",
                str(plan),
                "-o",
                str(out),
                "--quiet",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                # its client checks each connection's address against the target policy
                env={**os.environ, DIAL_GUARD_ENV: rule().to_env()},
            )
            on_start(time.monotonic())
            self._running.add(proc)
            try:
                _, err = await proc.communicate()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                self._running.discard(proc)
            if not out.exists():
                raise RuntimeError(
                    f"the stage's load did not run (exit {proc.returncode}): {err.decode()[-500:]}"
                )
            return figures(loads_document(out.read_text(encoding="utf-8")), load)

    def close(self) -> None:
        for proc in list(self._running):
            if proc.returncode is None:
                proc.kill()
