"""Run observer that snapshots the server's metrics around each level and stores the deltas.

The ``before`` snapshot is taken when the level starts (warm-up included): the server cannot tell
warm-up requests from measured ones, so its counters cover the whole level.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_bench.engines.base import RunObserver
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult
from mcp_bench.servermetrics.probes import ServerMetricsProbe, deltas, snapshot_all
from mcp_bench.servermetrics.snapshot import Snapshot


class ServerMetricsObserver(RunObserver):
    """Fills ``level.server_metrics`` with one delta per probe, keyed by probe name."""

    def __init__(self, probes: Sequence[ServerMetricsProbe]) -> None:
        names = [p.name for p in probes]
        if len(set(names)) != len(names):
            raise ValueError(f"server metrics probes need distinct names, got {names}")
        self.probes = list(probes)
        self._before: list[Snapshot] | None = None

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self._before = await snapshot_all(self.probes)

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        if self._before is None:
            return
        after = await snapshot_all(self.probes)
        result.server_metrics = deltas(self.probes, self._before, after)
        self._before = None
