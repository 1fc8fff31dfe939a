"""The drills this operator process is running, one per resource: a drill runs as a task of
its own so that an abort, a spec change or a deletion reaches it at once (kopf runs one handler
per object at a time; a drill inside a handler would hold all of them back for minutes)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass


@dataclass
class RunningDrill:
    generation: int
    task: asyncio.Task[None]


class Drills:
    def __init__(self) -> None:
        self._running: dict[str, RunningDrill] = {}

    def get(self, uid: str) -> RunningDrill | None:
        drill = self._running.get(uid)
        if drill is not None and drill.task.done():
            del self._running[uid]
            return None
        return drill

    def start(self, uid: str, generation: int, task: asyncio.Task[None]) -> None:
        self._running[uid] = RunningDrill(generation, task)

    def uids(self) -> list[str]:
        """The resources with a drill running now."""
        return [uid for uid in list(self._running) if self.get(uid) is not None]

    async def stop(self, uid: str) -> bool:
        """Cancel the drill and wait until it has reverted its faults; True if one was running."""
        drill = self._running.pop(uid, None)
        if drill is None or drill.task.done():
            return False
        drill.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await drill.task
        return True
