"""What one operator process holds while it runs, in one object: the rounds it is running and
one lock per gate (``claims``), how many rounds run at once (``admission``) and the change
handlers' rounds queued for it (``backlog``), its running drills,
the drills' load processes, the prober's bounded worker pool, and the verdict events it made sure
of when it adopted decided gates (``verdict_events``: one LIST of events per process).

It is created when the operator starts (``handlers.lifecycle.start_runtime``, a kopf startup
handler, through :func:`start`) and closed in one place, :meth:`Runtime.close`, called by the one
cleanup handler. The order of the shutdown is written there, not implied by the order in which
modules happen to be imported:

0. the queued rounds' runners are cancelled (``backlog``: the next leader resumes those gates);
1. every running drill is stopped, and each reverts its open faults on the way out (its load
   processes still run meanwhile: a drill whose load dies under it would end ``DrillFailed``
   instead); the next operator ends the run ``DrillInterrupted``;
2. the worker processes still running a probe round are ended (SIGTERM, then SIGKILL), or the
   interpreter's exit would wait for them for up to minutes;
3. the prober's pool is shut down;
4. the drills' load processes still alive are killed.

No kopf here: the handlers reach the runtime through :func:`current`.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from dataclasses import dataclass, field

from ..settings import OperatorSettings
from .admission import Admission
from .backlog import Backlog
from .claim import Claims
from .drill.load import LoadRunner
from .drill.registry import Drills
from .prober import Prober
from .verdictevents import VerdictEvents

WORKER_STOP_SECONDS = 5.0  # SIGTERM to a worker process, then SIGKILL


def terminate_workers(grace_seconds: float = WORKER_STOP_SECONDS) -> list[int]:
    """SIGTERM every worker process of this operator (a probe round still running in the
    prober's pool), SIGKILL those still alive after ``grace_seconds``; returns their pids."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace_seconds
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1.0)
    return [child.pid for child in children if child.pid is not None]


def kill_children() -> None:
    """SIGKILL every worker process of this operator at once."""
    for child in multiprocessing.active_children():
        child.kill()


@dataclass(frozen=True)
class Closed:
    """What :meth:`Runtime.close` stopped, for the cleanup handler's log lines."""

    drills: int
    workers: list[int]


@dataclass
class Runtime:
    prober: Prober
    claims: Claims = field(default_factory=Claims)
    drills: Drills = field(default_factory=Drills)
    loads: LoadRunner = field(default_factory=LoadRunner)
    admission: Admission = field(default_factory=lambda: Admission(OperatorSettings.max_rounds_admitted))
    verdict_events: VerdictEvents = field(default_factory=VerdictEvents)
    backlog: Backlog = field(init=False)

    def __post_init__(self) -> None:
        self.backlog = Backlog(self.admission)

    @classmethod
    def from_settings(cls, settings: OperatorSettings, namespaces: tuple[str, ...] = ()) -> Runtime:
        """``namespaces``: the ones the operator watches (``--namespace``; none: every one)."""
        prober = Prober(settings.max_concurrent_checks, settings.max_checks_per_target)
        return cls(
            prober=prober,
            admission=Admission(settings.max_rounds_admitted),
            verdict_events=VerdictEvents(namespaces),
        )

    async def stop_drills(self) -> int:
        """Cancel every running drill and wait until each has reverted its faults."""
        uids = self.drills.uids()
        stopped = await asyncio.gather(*(self.drills.stop(uid) for uid in uids), return_exceptions=True)
        return sum(1 for result in stopped if result is True)

    async def close(self, grace_seconds: float = WORKER_STOP_SECONDS) -> Closed:
        """A graceful shutdown, in this order (see the module's docstring)."""
        await self.backlog.close()
        drills = await self.stop_drills()
        workers = await asyncio.to_thread(terminate_workers, grace_seconds)
        self.prober.close()
        self.loads.close()
        return Closed(drills, workers)

    def kill(self) -> None:
        """Leadership lost: child processes (drill loads, probe workers) die at once, nothing is
        reverted or written (another process may lead by now)."""
        self.loads.close()
        kill_children()


_current: Runtime | None = None


def start(settings: OperatorSettings | None = None, namespaces: tuple[str, ...] = ()) -> Runtime:
    """A fresh runtime for this process (the operator's start-up); :func:`current` answers it."""
    global _current
    _current = Runtime.from_settings(settings or OperatorSettings.from_env(), namespaces)
    return _current


def current() -> Runtime:
    """The runtime the operator started with; a handler called before start-up is a bug."""
    if _current is None:
        raise RuntimeError("the operator's runtime is not started (handlers.lifecycle.start_runtime)")
    return _current


def started() -> Runtime | None:
    """The runtime if the operator has started, else None (leadership lost before start-up)."""
    return _current


async def stop() -> Closed | None:
    """Close the current runtime (the cleanup handler); a later :func:`current` raises."""
    global _current
    runtime, _current = _current, None
    if runtime is None:
        return None
    return await runtime.close()
