"""The gates whose change handler asked for a round, waiting for admission as small records.

A change handler (a gate created, resumed, or its spec changed) that waited in
``admission.admitted()`` held kopf's body, cause and patch of its object the whole time: about
28 KB a gate, 10 to 25 MiB at the peak when 1,000 gates arrived together, and the resident set
keeps a burst's mark (docs/guarantees.md). The handler now queues the object's key (namespace,
name, uid, generation: ``ticks.ObjectKey``) and returns; ``admission.limit`` runners take the keys
in the order they came and run each round, which reads its object afresh, as the handler did.
So nothing of kopf's is held while a gate waits, and exactly-once stays the round's own claim.

A key queued again while it waits is queued once. A round that asks to be tried again
(:class:`Retry`: a name that does not resolve yet, a fault not reverted yet, a claim lost to a
change) is queued again after its delay; one that raised, after ``error_delay_s`` (kopf's 60 s
for a handler that raised), logged with its traceback. A key whose object is gone or has a newer
generation ends at its first read. What is queued when the operator stops is not lost: the next
leader resumes every gate that has no verdict for its generation.

No kopf here: ``handlers.readiness`` queues and runs the rounds, ``handlers.lifecycle`` hands the
round to :meth:`Backlog.serve` and the runtime closes the runners.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable

from ..ticks import ObjectKey
from .admission import Admission

log = logging.getLogger(__name__)

ERROR_DELAY_S = 60.0  # kopf's delay before it calls a handler that raised again
Run = Callable[[ObjectKey], Awaitable[object]]


class Retry(Exception):
    """A round that cannot go on now and must be tried again after ``delay_s`` (kopf's
    ``TemporaryError`` for a queued round); its message says why."""

    def __init__(self, message: str, delay_s: float) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class Backlog:
    """The queued keys, the runners that take them, and the retries that wait for their delay."""

    def __init__(self, admission: Admission, error_delay_s: float = ERROR_DELAY_S) -> None:
        self._admission = admission
        self._error_delay_s = error_delay_s
        self._queue: asyncio.Queue[ObjectKey] = asyncio.Queue()
        self._queued: set[tuple[str, int]] = set()
        self._runners: list[asyncio.Task[None]] = []
        self._later: set[asyncio.TimerHandle] = set()
        self._context: contextvars.Context | None = None
        self._run: Run | None = None
        self._runners_wanted = 0

    def add(self, key: ObjectKey) -> bool:
        """Queue a round for ``key``'s generation; False if one is queued for it already. The
        first key's context (a kopf handler's) is the one the rounds run in: kopf posts events
        only from a context its object processing has set up."""
        if self._context is None:
            self._context = contextvars.copy_context()
            if self._run is not None:
                self._spawn()
        marker = (key.uid, key.generation)
        if marker in self._queued:
            return False
        self._queued.add(marker)
        self._queue.put_nowait(key)
        self._admission.queued(1)
        return True

    def __len__(self) -> int:
        return self._queue.qsize()

    def take(self) -> ObjectKey | None:
        """The next queued key, or None: a round run by hand (the unit tests)."""
        try:
            return self._taken(self._queue.get_nowait())
        except asyncio.QueueEmpty:
            return None

    def _taken(self, key: ObjectKey) -> ObjectKey:
        self._queued.discard((key.uid, key.generation))
        self._admission.queued(-1)
        return key

    async def run_one(self, key: ObjectKey, run: Run) -> None:
        """Run ``key``'s round under one of the admission's places; queue it again after the
        delay it asked for (:class:`Retry`) or after ``error_delay_s`` when it raised."""
        try:
            async with self._admission.admitted():
                await run(key)
        except Retry as retry:
            log.debug("%s/%s: %s; again in %gs", key.namespace, key.name, retry, retry.delay_s)
            self._again(key, retry.delay_s)
        except Exception:
            delay = self._error_delay_s
            log.exception("%s/%s: the round failed; trying again in %gs", key.namespace, key.name, delay)
            self._again(key, delay)

    def _again(self, key: ObjectKey, delay_s: float) -> None:
        def requeue() -> None:
            self._later.discard(handle)
            self.add(key)

        handle = asyncio.get_running_loop().call_later(delay_s, requeue)
        self._later.add(handle)

    def serve(self, run: Run, runners: int) -> None:
        """Run the queued rounds with ``run``, ``runners`` at a time, until :meth:`close`. The
        runners start on the first key, in its handler's context (:meth:`add`)."""
        self._run, self._runners_wanted = run, runners
        if self._context is not None:
            self._spawn()

    def _spawn(self) -> None:
        assert self._context is not None and self._run is not None
        while len(self._runners) < self._runners_wanted:
            name = f"readiness round runner {len(self._runners)}"
            task = asyncio.create_task(self._serve(self._run), name=name, context=self._context.copy())
            self._runners.append(task)

    async def _serve(self, run: Run) -> None:
        while True:
            await self.run_one(self._taken(await self._queue.get()), run)

    async def close(self) -> int:
        """Cancel the runners (a round that runs is cancelled, as kopf cancels its handlers at
        shutdown) and the retries that wait; returns how many retries were waiting."""
        for handle in self._later:
            handle.cancel()
        waiting = len(self._later)
        self._later.clear()
        for task in self._runners:
            task.cancel()
        for task in self._runners:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._runners.clear()
        self._run = None
        return waiting
