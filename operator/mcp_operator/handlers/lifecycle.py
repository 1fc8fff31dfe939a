"""A graceful shutdown. On SIGTERM (a pod deleted, a node drained, a rollout) kopf stops its
watchers and cancels the handlers that run, then runs the cleanup handlers in the order they were
registered, while tasks such as a drill still run, and exits.

This module's cleanup runs first (``handlers/__init__`` imports it before ``readiness``; a unit
test checks the order): it stops every running drill, which reverts its open faults on the way
out (the journal says ``Reverted``; the next operator ends the run ``DrillInterrupted``), before
``readiness.stop_prober`` kills the drills' load processes (a drill whose load dies under it would
end ``DrillFailed`` instead); then it ends the worker processes still running a probe round, or
interpreter exit would wait for them for up to minutes. All of it must end within
``MCP_SHUTDOWN_TIMEOUT_SECONDS`` (``handlers.startup``), below the pod's grace period.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import time
from typing import Any, NoReturn

import kopf

WORKER_STOP_SECONDS = 5.0  # SIGTERM to a worker process, then SIGKILL


async def stop_drills() -> int:
    """Cancel every running drill and wait until each has reverted its faults."""
    from .readiness import DRILLS

    uids = DRILLS.uids()
    stopped = await asyncio.gather(*(DRILLS.stop(uid) for uid in uids), return_exceptions=True)
    return sum(1 for result in stopped if result is True)


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


def abandon(why: str) -> NoReturn:
    """Leadership lost: stop acting at once, as a crash would. Another process may hold the Lease
    already, so nothing is reverted or written here; the successor replays the open journals (the
    crash-point tests prove that path). Child processes (probe workers, drill loads) die first."""
    from .readiness import LOADS

    logging.getLogger(__name__).error("leadership lost (%s): exiting without acting further", why)
    LOADS.close()
    for child in multiprocessing.active_children():
        child.kill()
    logging.shutdown()
    os._exit(1)


@kopf.on.cleanup(id="graceful-shutdown")
async def graceful_shutdown(logger: kopf.Logger, **_: Any) -> None:
    drills = await stop_drills()
    if drills:
        logger.info("stopped %d drill(s); their faults are reverted", drills)
    workers = await asyncio.to_thread(terminate_workers)
    if workers:
        logger.info("stopped %d worker process(es): %s", len(workers), ", ".join(map(str, workers)))
