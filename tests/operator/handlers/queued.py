"""The MCPReadiness change handler as kopf calls it, then the round it queued
(``readiness.backlog``) as a runner runs it once admitted: what the tests of a gate's first
round call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import kopf

from mcp_operator.handlers import readiness as handlers
from mcp_operator.readiness import runtime

Handler = Callable[..., Awaitable[None]]


async def evaluate_and_run(body: kopf.Body, **kwargs: Any) -> None:
    """The handler leaves nothing in kopf's patch (whatever the round writes goes through the
    API) and queues at most one round, for the generation of ``body``."""
    patch = kopf.Patch()
    evaluate = cast(Handler, handlers.evaluate_readiness)
    await evaluate(spec=body.spec, status=body.status, meta=body.meta, body=body, patch=patch, **kwargs)
    assert dict(patch) == {}
    queued = runtime.current().backlog.take()
    assert runtime.current().backlog.take() is None  # one round a generation
    if queued is not None:
        assert (queued.uid, queued.generation) == (body.meta["uid"], body.meta["generation"])
        run = cast(Handler, handlers.run_queued_round)
        await run(meta=queued.body["metadata"], body=queued.body)
