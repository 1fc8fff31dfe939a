"""The operator's life: the runtime (``mcp_operator.readiness.runtime``: claims, drills, load processes,
the prober, the queued rounds' runners), the periodic ticks (``handlers.periodic``) and the heap
trimmer (``heap``) start when kopf starts, and are closed in one cleanup handler, the ticks first.

A graceful shutdown: on SIGTERM (a pod deleted, a node drained, a rollout) kopf stops its
watchers and cancels the handlers that run, then runs the cleanup handlers, while tasks such as
a drill still run, and exits. The one cleanup handler here closes the runtime, whose
``Runtime.close`` holds the order: running drills stopped (each reverts its open faults; the next
operator ends the run ``DrillInterrupted``), then the worker processes still running a probe
round, then the prober's pool and the drills' load processes. All of it must end within
``MCP_SHUTDOWN_TIMEOUT_SECONDS`` (``handlers.startup``), below the pod's grace period.
"""

from __future__ import annotations

from typing import Any

import kopf

from .. import heap
from ..readiness import runtime
from ..settings import OperatorSettings
from ..ticks import as_handler
from . import periodic, readiness

# the operator's memo key for the namespaces ``mcp-operator run`` gave kopf (none: every namespace)
WATCHED = "namespaces"


@kopf.on.startup(id="runtime")
async def start_runtime(logger: kopf.Logger, memo: kopf.Memo | None = None, **_: Any) -> None:
    """One runtime for this process, created on the operator's loop."""
    settings = OperatorSettings.from_env()
    namespaces = tuple(memo.get(WATCHED) or ()) if memo is not None else ()
    started = runtime.start(settings, namespaces)
    await started.verdict_events.prime()  # before kopf hands over the first gate
    started.backlog.serve(as_handler(readiness.run_queued_round), started.admission.limit)
    periodic.TICKER.start()
    heap.TRIMMER.start(settings.heap_trim_seconds)
    logger.debug("runtime started: %d probing worker(s) at most", started.prober.max_concurrent)


@kopf.on.cleanup(id="graceful-shutdown")
async def graceful_shutdown(logger: kopf.Logger, **_: Any) -> None:
    ticks = await periodic.TICKER.close()  # first: a tick may start a round on the runtime
    await heap.TRIMMER.close()
    if ticks:
        logger.info("stopped %d periodic tick(s) that were running", ticks)
    closed = await runtime.stop()
    if closed is None:
        return
    if closed.drills:
        logger.info("stopped %d drill(s); their faults are reverted", closed.drills)
    if closed.workers:
        pids = ", ".join(map(str, closed.workers))
        logger.info("stopped %d worker process(es): %s", len(closed.workers), pids)
