"""One collect tick's work on a running benchmark's live state: read the shards' progress
reports, open the start barrier's next level when every running shard waits at it, and return
the status's ``progress`` (the decisions are ``barrier``'s pure functions)."""

from __future__ import annotations

import time
from typing import Any

from ..api.benchmark import MCPBenchmarkSpec
from . import reconcile
from .barrier import (
    LEAD_NS,
    barrier_on,
    level_to_release,
    live_shards,
    progress_status,
    read_progress,
    sound_starts,
)
from .collect import pod_indices
from .contract import start_object_name
from .start import Announce


async def run_progress(
    namespace: str,
    job: str,
    state: reconcile.JobState,
    pods: list[Any],
    spec: MCPBenchmarkSpec,
    owner: tuple[str, str],
    announce: Announce,
) -> dict[str, Any] | None:
    """The status's progress block (camelCase), or None before any shard has reported.
    ``owner``: the MCPBenchmark's name and uid, for a start object someone deleted (made again,
    signed, within a tick: the shards wait for it instead of waiting the barrier out alone)."""
    key = await reconcile.read_run_key(namespace, job)
    run = await reconcile.read_run_state(namespace, job, spec.shards, key)
    if not run.progress:
        return None
    indices = pod_indices(pods, state.uid)
    reports = {
        index: report
        for index, text in run.progress.items()
        if (report := read_progress(text, key, index, indices)) is not None
    }
    live = live_shards(spec.shards, pods, state.uid)
    now = time.time_ns()
    starts, dropped = sound_starts(run.starts, now)
    for stale, problem in sorted(dropped.items()):
        announce(True, "BarrierStartReplaced", f"level {stale + 1}: the start object held {problem}")
    if barrier_on(spec) and key is not None:  # a start no one signed is no start
        level = level_to_release(reports, live, starts)
        if level is not None:
            starts[level] = now + LEAD_NS
        missing = not run.start_object
        if missing:
            message = f"{start_object_name(job)} was deleted: made again, signed"
            announce(True, "StartObjectRecreated", message)
        if level is not None or missing or dropped:
            await reconcile.write_starts(namespace, job, starts, key, owner if missing else None)
    block = progress_status(reports, live, starts)
    return None if block is None else block.to_wire()
