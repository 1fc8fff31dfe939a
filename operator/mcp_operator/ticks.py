"""Periodic work on the objects of one resource, scheduled here instead of by kopf's timers.

Why not kopf's timers and daemons: kopf keeps the whole last-seen body of every object of a
resource that has one, whether or not any timer's filter matches it (``live_fresh_body``, the
kwargs of the next tick). 1,000 decided gates held about 21 MB of bodies that no tick would ever
read. Here an object costs its key and the names of the ticks it wants, taken from each watch
event (:meth:`Ticker.observe`), and nothing at all while it wants none; a tick reads the object
as the API server has it when it runs.

A tick runs in a copy of the context of the handler that fed it its first watch event: kopf
posts events (``kopf.event``) only from a context its object processing has set up, and the
domain code posts its events that way wherever it runs.

The semantics are kopf's non-sharp timers: a tick first runs ``initial_delay_s`` after its
object came to want it, then ``interval_s`` after each run ended (``backoff_s`` after one that
raised, logged with its traceback); never twice at once for one object; not again once the
object stops wanting it or is deleted. No kopf here: ``handlers.periodic`` feeds the watch
events in and owns the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Slot = tuple[str, str]  # (uid, tick name)


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """What a tick is told of its object: where it is and which spec generation the watch saw.
    ``body`` is the least a handler's ``body`` kwarg needs (events, log context)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    generation: int

    @property
    def body(self) -> dict[str, Any]:
        meta = {"namespace": self.namespace, "name": self.name, "uid": self.uid}
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {**meta, "generation": self.generation},
        }


@dataclass(frozen=True, slots=True)
class Tick:
    """One kind of periodic work: whether an object wants it, from its spec and status as the
    watch showed them (cheap: it runs on every event), and the work itself."""

    name: str
    interval_s: float
    initial_delay_s: float
    wanted: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
    run: Callable[[ObjectKey], Awaitable[object]]
    backoff_s: float = 60.0  # kopf's default for a timer that raised


@dataclass(frozen=True, slots=True)
class _Watched:
    key: ObjectKey
    wanted: frozenset[str]


def as_handler(fn: Callable[..., Awaitable[object]]) -> Callable[[ObjectKey], Awaitable[object]]:
    """Call a handler as kopf would have: with the object's ``meta`` and ``body``."""

    async def run(key: ObjectKey) -> object:
        body = key.body
        return await fn(meta=body["metadata"], body=body)

    return run


def object_key(body: Mapping[str, Any]) -> ObjectKey:
    meta = body.get("metadata") or {}
    return ObjectKey(
        str(body.get("apiVersion") or ""),
        str(body.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        int(meta.get("generation") or 0),
    )


class Ticker:
    """The due times of every (object, tick) pair that is wanted, and the loop that runs them."""

    def __init__(self, ticks: Iterable[Tick], clock: Callable[[], float] = time.monotonic) -> None:
        self._ticks = {tick.name: tick for tick in ticks}
        self._clock = clock
        self._objects: dict[str, _Watched] = {}
        self._due: dict[Slot, float] = {}
        self._running: dict[Slot, asyncio.Task[None]] = {}
        self._loop: asyncio.Task[None] | None = None
        self._context: contextvars.Context | None = None

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A watch event: which ticks the object wants now. A deleted object, or one being
        deleted, wants none (a tick that runs finishes, and is not run again)."""
        if self._context is None:
            self._context = contextvars.copy_context()
        key = object_key(body)
        wanted: frozenset[str] = frozenset()
        if event_type != "DELETED" and not (body.get("metadata") or {}).get("deletionTimestamp"):
            spec, status = body.get("spec") or {}, body.get("status") or {}
            wanted = frozenset(name for name, tick in self._ticks.items() if tick.wanted(spec, status))
        if wanted:
            self._objects[key.uid] = _Watched(key, wanted)
        else:
            self._objects.pop(key.uid, None)
        now = self._clock()
        for name, tick in self._ticks.items():
            slot = (key.uid, name)
            if name not in wanted:
                self._due.pop(slot, None)
            elif slot not in self._due and slot not in self._running:
                self._due[slot] = now + tick.initial_delay_s

    def due(self, slot: Slot) -> float | None:
        """When ``slot`` runs next (the clock's time), None while it runs or is not wanted."""
        return self._due.get(slot)

    def tracked(self) -> int:
        """How many objects want a tick now."""
        return len(self._objects)

    def start_due(self) -> list[asyncio.Task[None]]:
        """Start every tick that is due now, each as a task of its own."""
        now = self._clock()
        started = []
        for slot in [slot for slot, at in self._due.items() if at <= now]:
            del self._due[slot]
            watched = self._objects.get(slot[0])
            if watched is None or slot[1] not in watched.wanted:
                continue
            name = f"tick {slot[1]} {watched.key.namespace}/{watched.key.name}"
            context = (self._context or contextvars.copy_context()).copy()
            task = asyncio.create_task(self._run(slot, watched.key), name=name, context=context)
            self._running[slot] = task
            started.append(task)
        return started

    async def _run(self, slot: Slot, key: ObjectKey) -> None:
        tick = self._ticks[slot[1]]
        wait = tick.interval_s
        try:
            await tick.run(key)
        except Exception:
            wait = tick.backoff_s
            log.exception("%s/%s: %s failed; trying again in %gs", key.namespace, key.name, tick.name, wait)
        finally:
            self._running.pop(slot, None)
            watched = self._objects.get(slot[0])
            if watched is not None and slot[1] in watched.wanted:
                self._due[slot] = self._clock() + wait

    def start(self, resolution_s: float = 0.5) -> None:
        """Run due ticks every ``resolution_s`` on the running loop until :meth:`close`."""
        if self._loop is None:
            self._loop = asyncio.create_task(self._every(resolution_s), name="ticks")

    async def _every(self, resolution_s: float) -> None:
        while True:
            self.start_due()
            await asyncio.sleep(resolution_s)

    async def close(self) -> int:
        """Stop the loop and cancel the ticks that run (at shutdown, as kopf cancels its timers);
        returns how many were cancelled. The objects stay tracked: a later start goes on."""
        running = list(self._running.values())
        tasks = [*running, *([self._loop] if self._loop is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loop = None
        return len(running)
