"""The operator's life: the runtime (``mcp_operator.readiness.runtime``: claims, drills, load processes,
the prober) is created when kopf starts, and closed in one cleanup handler.

A graceful shutdown: on SIGTERM (a pod deleted, a node drained, a rollout) kopf stops its
watchers and cancels the handlers that run, then runs the cleanup handlers, while tasks such as
a drill still run, and exits. The one cleanup handler here closes the runtime, whose
``Runtime.close`` holds the order: running drills stopped (each reverts its open faults; the next
operator ends the run ``DrillInterrupted``), then the worker processes still running a probe
round, then the prober's pool and the drills' load processes. All of it must end within
``MCP_SHUTDOWN_TIMEOUT_SECONDS`` (``handlers.startup``), below the pod's grace period.
"""

from __future__ import annotations

import logging
import os
from typing import Any, NoReturn

import kopf

from ..readiness import runtime


@kopf.on.startup(id="runtime")
async def start_runtime(logger: kopf.Logger, **_: Any) -> None:
    """One runtime for this process, created on the operator's loop."""
    started = runtime.start()
    logger.debug("runtime started: %d probing worker(s) at most", started.prober.max_concurrent)


@kopf.on.cleanup(id="graceful-shutdown")
async def graceful_shutdown(logger: kopf.Logger, **_: Any) -> None:
    closed = await runtime.stop()
    if closed is None:
        return
    if closed.drills:
        logger.info("stopped %d drill(s); their faults are reverted", closed.drills)
    if closed.workers:
        pids = ", ".join(map(str, closed.workers))
        logger.info("stopped %d worker process(es): %s", len(closed.workers), pids)


def abandon(why: str) -> NoReturn:
    """Leadership lost: stop acting at once, as a crash would. Another process may hold the Lease
    already, so nothing is reverted or written here; the successor replays the open journals (the
    crash-point tests prove that path). Child processes (probe workers, drill loads) die first."""
    logging.getLogger(__name__).error("leadership lost (%s): exiting without acting further", why)
    held = runtime.started()
    if held is not None:
        held.kill()
    else:
        runtime.kill_children()
    logging.shutdown()
    os._exit(1)
