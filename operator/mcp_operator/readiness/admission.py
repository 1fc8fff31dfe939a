"""How many gates' rounds this process runs at once.

A cold start with a backlog hands kopf every pending gate at once: a thousand handlers each
read their object, claim a round and queue for a probe worker together, so every gate showed
Running for the whole backlog while the API server and the event loop took the burst. Rounds
are admitted in the order they ask, at most ``limit`` at a time; one waiting for admission has
read and written nothing yet, and its gate keeps the status it had. The change handlers' rounds
wait as keys in ``readiness.backlog`` before they ask; they count as waiting here too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from .. import metrics


class Admission:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("at least one round must be admitted at a time")
        self.limit = limit
        self.waiting = 0
        self._slots = asyncio.Semaphore(limit)

    def queued(self, change: int) -> None:
        """Rounds queued to ask later (``readiness.backlog``) wait too: count ``change`` more."""
        self.waiting += change
        metrics.ROUNDS_WAITING.set(self.waiting)

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """Hold one of the ``limit`` places for the duration of a round."""
        self.queued(1)
        try:
            await self._slots.acquire()
        finally:
            self.queued(-1)
        try:
            yield
        finally:
            self._slots.release()
