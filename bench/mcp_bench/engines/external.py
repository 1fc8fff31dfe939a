"""What the external engines (Locust, k6) share: the run loop, the tool subprocess, the record tail.

An external engine runs one level at a time as a subprocess that writes one line per request to
a file. :class:`ExternalEngine` feeds those lines into the same :class:`LevelAccumulator` the
built-in engine uses, so the result document (HDR histograms, error kinds, SLO verdicts) is built
by the same code whichever tool sent the load. Subclasses only say how to start the tool for a
level and how to parse its lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from mcp_bench.engines.base import RunObserver, fingerprint
from mcp_bench.engines.runloop import drain_s, finish_run, level_accumulator, report_progress, run_levels
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument

TICK_S = 0.25
TERM_GRACE_S = 5.0
TAIL_CHARS = 2_000
# Time a tool gets beyond the level's planned time (start-up, spawning, drain) before it is killed.
START_ALLOWANCE_S = 60.0


class ExternalEngineError(RuntimeError):
    """The tool could not run a level or left no usable output; the message says why."""


class EngineUnavailableError(ExternalEngineError):
    """The tool is not installed where the engine looks for it."""


def find_tool(name: str, explicit: str | None, missing_hint: str) -> str:
    """Absolute path of ``explicit`` (a path or a name on PATH) or of ``name`` on PATH."""
    wanted = explicit or name
    found = shutil.which(wanted)
    if found is None:
        where = f"{wanted!r} is not an executable file" if explicit else f"{name} not found on PATH"
        raise EngineUnavailableError(f"{where}; {missing_hint}")
    return found


@dataclass
class ToolRun:
    returncode: int
    stdout_tail: str
    stderr_tail: str
    elapsed_s: float


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_CHARS))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the tool's process group, then SIGKILL after a grace period."""
    for sig, wait_s in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, TERM_GRACE_S)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), wait_s)
            return


async def run_tool(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    on_tick: Callable[[], None] | None = None,
) -> ToolRun:
    """Run ``cmd`` with stdout/stderr in ``cwd`` (no pipe to fill), calling ``on_tick`` a few times a
    second. Past ``timeout_s``, or when cancelled, the tool is stopped; a timeout raises."""
    out_path, err_path = cwd / "stdout.log", cwd / "stderr.log"
    start = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, cwd=cwd, env=None if env is None else dict(env), stdout=out, stderr=err,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            raise EngineUnavailableError(f"cannot start {cmd[0]}: {exc}") from exc
        try:
            while True:
                try:
                    await asyncio.wait_for(proc.wait(), TICK_S)
                    break
                except TimeoutError:
                    pass
                if on_tick is not None:
                    on_tick()
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    await _stop(proc)
                    raise ExternalEngineError(
                        f"{Path(cmd[0]).name} ran past {timeout_s:.0f} s and was stopped; "
                        f"stderr: {_tail(err_path)}"
                    )
        except asyncio.CancelledError:
            await _stop(proc)
            raise
    return ToolRun(proc.returncode or 0, _tail(out_path), _tail(err_path), time.monotonic() - start)


class LineTail:
    """Reads a file another process is appending lines to; hands each complete line to ``parse``."""

    def __init__(self, path: Path, parse: Callable[[str], None]) -> None:
        self.path = path
        self.parse = parse
        self._pos = 0
        self._partial = ""
        self.lines = 0

    def poll(self, final: bool = False) -> None:
        try:
            with self.path.open("r", encoding="utf-8", errors="replace") as f:
                f.seek(self._pos)
                chunk = f.read()
                self._pos = f.tell()
        except FileNotFoundError:
            return
        text = self._partial + chunk
        *complete, self._partial = text.split("\n")
        if final and self._partial:
            complete.append(self._partial)
            self._partial = ""
        for line in complete:
            if line:
                self.lines += 1
                self.parse(line)


@dataclass
class LevelRun:
    """What a tool reported about one level beside the records."""

    stop_reason: str
    server: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def reject_unsupported(engine: str, plan: RunPlan, backends: Sequence[str]) -> None:
    """Fail before any traffic for plan features an external engine does not carry out."""
    if plan.backend not in backends:
        raise PlanError(
            f"backend: the {engine} engine supports {', '.join(repr(b) for b in backends)} only, "
            f"got {plan.backend!r} (the builtin engine supports every backend)"
        )
    for name in ("stability", "breaker", "retry"):
        if getattr(plan, name) is not None:
            raise PlanError(
                f"{name}: not applied by the {engine} engine; remove it or use the builtin engine"
            )
    if plan.levels.connections not in (None, "cold"):
        raise PlanError(
            f"levels.connections: the {engine} engine runs each level in a new process whose users "
            f"open their connections with their first requests (cold); {plan.levels.connections!r} "
            "needs the builtin engine"
        )
    if plan.levels.ramp_s > 0:
        raise PlanError(f"levels.ramp_s: not applied by the {engine} engine; use the builtin engine")
    if plan.payload.workload is not None:
        raise PlanError(f"payload.workload: not supported by the {engine} engine (one fixed request only)")
    for name in ("classes", "shape_sweep", "images", "image_tensor"):
        if getattr(plan.payload, name):
            raise PlanError(f"payload.{name}: not supported by the {engine} engine (one fixed request only)")


def clean_env(drop_prefixes: Sequence[str]) -> dict[str, str]:
    """This process's environment without variables that would reconfigure the tool behind our back."""
    return {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop_prefixes))}


def level_time_limit_s(plan: RunPlan) -> float | None:
    """How long a level may run in the tool before it is stopped (None: bounded by requests only)."""
    stage = plan.stage
    if stage.duration_s is None:
        return None
    return stage.warmup_s + stage.duration_s + drain_s(plan) + START_ALLOWANCE_S


@dataclass
class ExternalLevel:
    """One level as an external engine runs it: the plan and level, a fresh working folder, the
    accumulator every request goes into (Unix ns instants), and ``tick`` for progress."""

    plan: RunPlan
    meta: LevelMeta
    workdir: Path
    acc: LevelAccumulator
    tick: Callable[[], None]

    async def run_tailed(
        self, cmd: Sequence[str], *, env: Mapping[str, str], records: Path, parse: Callable[[str], None]
    ) -> ToolRun:
        """Run the level's tool in ``workdir`` within the level's time limit, handing each line it
        appends to ``records`` to ``parse`` while it runs and once more after it exits."""
        tail = LineTail(records, parse)

        def on_tick() -> None:
            tail.poll()
            self.tick()

        run = await run_tool(
            cmd, cwd=self.workdir, env=env, timeout_s=level_time_limit_s(self.plan), on_tick=on_tick
        )
        tail.poll(final=True)
        return run


class ExternalEngine(ABC):
    """Runs each level of a plan in an external tool and builds the result document."""

    name: str = ""

    @abstractmethod
    def check_features(self, plan: RunPlan) -> None:
        """Raise :class:`PlanError` for what the tool cannot carry out; no tool is needed for this,
        so an operator can check a spec before it starts any pod."""

    @abstractmethod
    def check_tool(self) -> None:
        """Raise :class:`EngineUnavailableError` when the tool is not installed here."""

    def check_plan(self, plan: RunPlan) -> None:
        """Everything that must hold before any traffic."""
        self.check_features(plan)
        self.check_tool()

    @abstractmethod
    def engine_version(self) -> str: ...

    @abstractmethod
    async def run_level(self, level: ExternalLevel) -> LevelRun:
        """Run one level, feeding every request into ``level.acc``; call ``level.tick`` while the
        tool runs (:meth:`ExternalLevel.run_tailed` does) so progress reaches the observers."""

    async def run(self, plan: RunPlan, observers: Sequence[RunObserver] = ()) -> ResultDocument:
        self.check_plan(plan)
        version = self.engine_version()
        started = datetime.now(UTC)
        notes: list[str] = []
        server: dict[str, str] = {}
        for obs in observers:
            await obs.run_started(plan)

        with tempfile.TemporaryDirectory(prefix=f"mcp-bench-{self.name}-") as tmp:

            async def one_level(meta: LevelMeta) -> LevelResult:
                nonlocal server
                acc = level_accumulator(plan, meta, offset_ns=0)  # the tools report Unix ns
                acc.connections = "cold"  # a new tool process per level (connect time not seen)
                workdir = Path(tmp) / f"level-{meta.index}"
                workdir.mkdir()
                run = await self.run_level(
                    ExternalLevel(plan, meta, workdir, acc, _ticker(plan, meta, acc, observers))
                )
                result = acc.to_result(meta, stop_reason=run.stop_reason)
                server = server or run.server
                notes.extend(f"{result.level_label}: {n}" for n in run.notes)
                return result

            levels = await run_levels(plan, observers, one_level)
        return await finish_run(
            plan,
            observers,
            started=started,
            engine=fingerprint(self.name, version, server),
            levels=levels,
            notes=notes,
        )


def _ticker(
    plan: RunPlan, meta: LevelMeta, acc: LevelAccumulator, observers: Sequence[RunObserver]
) -> Callable[[], None]:
    start = time.monotonic()

    def tick() -> None:
        report_progress(plan, meta, acc, observers, time.monotonic() - start)

    return tick
