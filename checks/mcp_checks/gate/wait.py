"""The gate's wait: read, then watch from what was read, until the verdict waited for is there,
none can come, or the time is up."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..status import ReadinessObject
from .judge import Decision, Wanted, judge, settled, timed_out
from .source import CannotAppear, GateSource, Transient

WATCH_CHUNK_S = 60  # one watch request at most this long, then read again
RETRY_S = 1.0


def wait_for_verdict(
    source: GateSource,
    wanted: Wanted,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    note: Callable[[str], None] = lambda _: None,
) -> Decision:
    """Read, then watch from what was read, until ``judge`` decides, ``settled`` finds that no
    such evaluation will come, or the time is up; ``CannotAppear`` when the gate's namespace or
    kind does not exist."""
    started = clock()
    deadline = started + timeout_s
    obj: ReadinessObject | None = None
    announced = False
    api_error: str | None = None  # the last failure, while the API server is not answering
    while clock() < deadline:
        try:
            raw = source.get()
            api_error = None
            obj = None if raw is None else ReadinessObject.read(raw)
            if obj is None:
                why = source.missing()
                if why is not None:
                    raise CannotAppear(why)
                if not announced:
                    note("the MCPReadiness does not exist (yet); waiting for it")
                    announced = True
                version = None
            else:
                decision = judge(obj, wanted) or settled(obj, wanted)
                if decision is not None:
                    return decision
                version = obj.metadata.resource_version or None
            for kind, changed in source.changes(version, min(WATCH_CHUNK_S, max(1.0, deadline - clock()))):
                if kind == "DELETED":
                    obj = None
                    continue
                if kind not in ("ADDED", "MODIFIED"):
                    continue
                obj = ReadinessObject.read(changed)
                decision = judge(obj, wanted) or settled(obj, wanted)
                if decision is not None:
                    return decision
                if clock() >= deadline:
                    break
        except Transient as exc:
            api_error = str(exc)
            note(f"API: {exc}; retrying")
            sleep(min(RETRY_S, max(0.0, deadline - clock())))
    return timed_out(obj, wanted, clock() - started, api_error)
