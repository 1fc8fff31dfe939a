"""Start gates and shard overlap: a level held until a common start time records it, and a merge
of shards that did not run together flags the level instead of calling it cluster-wide."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.engines import run_plan_sync
from mcp_bench.engines.base import RunObserver
from mcp_bench.engines.gate import GateObserver, LevelProgress, StartAtGate, parse_start_at
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult, ShardWindow, dumps_document, loads_document
from mcp_bench.results.merge import merge_documents, window_overlap
from mcp_refserver import RunningServer


def _plan(url: str, **kw: Any) -> RunPlan:
    data: dict[str, Any] = {
        "url": f"{url}/health",
        "request_timeout_s": 5.0,
        "levels": {"concurrency": [2, 2]},
        "stage": {"duration_s": 0.4},
    }
    data.update(kw)
    return RunPlan.from_dict(data)


def _window(start_ms: float, end_ms: float) -> ShardWindow:
    return ShardWindow(start_unix_ns=int(start_ms * 1e6), end_unix_ns=int(end_ms * 1e6))


def test_overlap_is_the_shared_time_over_the_covered_time() -> None:
    assert window_overlap([_window(0, 1000), _window(0, 1000)]) == 1.0
    assert window_overlap([_window(0, 1000), _window(500, 1500)]) == pytest.approx(500 / 1500)
    assert window_overlap([_window(0, 1000), _window(2000, 3000)]) == 0.0  # never met
    assert window_overlap([_window(0, 1000)]) is None  # one shard: nothing to compare


class HostDelay:
    """The longest a thread of this process waited past a 2 ms sleep while it ran: ground truth
    for how late a woken task can be on this host right now (a busy 2-core machine makes that
    hundreds of milliseconds at times), taken beside the run it excuses."""

    def __init__(self) -> None:
        self.longest_ns = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            before = time.perf_counter_ns()
            time.sleep(0.002)
            self.longest_ns = max(self.longest_ns, time.perf_counter_ns() - before - 2_000_000)

    def __enter__(self) -> HostDelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_start_at_holds_the_first_window_and_the_level_records_it(refserver: RunningServer) -> None:
    # 3 s ahead: opening the connections before the window must never be what makes it late
    start_ns = time.time_ns() + 3_000_000_000
    with HostDelay() as delay:
        doc = run_plan_sync(_plan(refserver.url), [StartAtGate(start_ns)])
    first, second = doc.levels
    assert first.start_at_unix_ns == start_ns and second.start_at_unix_ns is None
    assert first.first_start_unix_ns is not None
    # the first measured send goes out at the time, not before it and not long after (50 ms,
    # plus however late this host woke a sleeping thread meanwhile)
    late_ns = first.first_start_unix_ns - start_ns
    assert 0 <= late_ns < 50_000_000 + delay.longest_ns, (late_ns, delay.longest_ns)


def _shard(doc_text: str, index: int, shift_ns: int) -> Any:
    doc = loads_document(doc_text)
    doc.shard_index = index
    for level in doc.levels:
        assert level.first_start_unix_ns is not None and level.last_end_unix_ns is not None
        level.first_start_unix_ns += shift_ns
        level.last_end_unix_ns += shift_ns
    return doc


def test_a_merge_flags_levels_whose_shards_did_not_run_together(refserver: RunningServer) -> None:
    text = dumps_document(run_plan_sync(_plan(refserver.url)))
    together = merge_documents([_shard(text, 0, 0), _shard(text, 1, 5_000_000)])  # 5 ms apart
    for level in together.levels:
        assert level.overlap is not None and level.overlap > 0.95
        assert level.not_concurrent is None
        assert [w.shard for w in level.shard_windows or []] == [0, 1]
    apart = merge_documents([_shard(text, 0, 0), _shard(text, 1, 300_000_000)])  # most of a level
    for level in apart.levels:
        assert level.overlap is not None and level.overlap < 0.5
        assert level.not_concurrent is not None and "not a cluster-wide figure" in level.not_concurrent
    # merging merged documents keeps one window per shard
    again = merge_documents([together, _shard(text, 2, 0)])
    assert [w.shard for w in again.levels[0].shard_windows or []] == [0, 1, 2]
    # a few milliseconds apart on a level of a few milliseconds is start-up jitter, not shards
    # that ran apart: below 100 ms of unshared time in all, a level is never flagged
    tiny = [_shard(text, i, 0) for i in range(2)]
    for level in tiny[1].levels:
        assert level.first_start_unix_ns is not None and level.last_end_unix_ns is not None
        level.last_end_unix_ns = level.first_start_unix_ns + 4_000_000
        level.first_start_unix_ns += 3_000_000
    for level in tiny[0].levels:
        assert level.first_start_unix_ns is not None
        level.last_end_unix_ns = level.first_start_unix_ns + 5_000_000
    jitter = merge_documents(tiny)
    assert all(
        lv.overlap is not None and lv.overlap < 0.9 and lv.not_concurrent is None for lv in jitter.levels
    )
    # and the threshold is the caller's
    lenient = merge_documents([_shard(text, 0, 0), _shard(text, 1, 300_000_000)], min_overlap=0.0)
    assert all(level.not_concurrent is None for level in lenient.levels)


class Recorder(GateObserver):
    """Sees when each level was held and what its progress said."""

    def __init__(self) -> None:
        self.ready: list[tuple[int, int]] = []
        self.progress_seen: list[LevelProgress] = []

    async def level_ready(self, plan: RunPlan, meta: LevelMeta) -> None:
        self.ready.append((meta.index, time.time_ns()))
        await asyncio.sleep(0.3)

    def level_progress(self, meta: LevelMeta, progress: LevelProgress) -> None:
        self.progress_seen.append(progress)


def test_a_gate_is_held_before_every_window_and_hears_progress(refserver: RunningServer) -> None:
    gate = Recorder()
    doc = run_plan_sync(_plan(refserver.url), [gate])
    assert [index for index, _ in gate.ready] == [0, 1]
    for (_, held_ns), level in zip(gate.ready, doc.levels, strict=True):
        assert level.first_start_unix_ns is not None
        assert level.first_start_unix_ns - held_ns >= 300_000_000  # nothing sent while held
    assert gate.progress_seen and all(p.sent >= p.completed + p.failed for p in gate.progress_seen)
    assert max(p.completed for p in gate.progress_seen) > 0


def test_the_worker_pool_holds_every_worker_until_the_gate_opens(refserver: RunningServer) -> None:
    gate = Recorder()
    doc = run_plan_sync(_plan(refserver.url, workers=2, levels={"concurrency": [2]}), [gate])
    ((_, held_ns),) = gate.ready
    (level,) = doc.levels
    assert level.first_start_unix_ns is not None and level.first_start_unix_ns - held_ns >= 300_000_000
    assert level.shard_windows is None  # one shard's workers are not shards


def test_parse_start_at() -> None:
    assert parse_start_at("1796280000.5") == 1_796_280_000_500_000_000
    assert parse_start_at("2026-12-03T06:30:00Z") == parse_start_at("2026-12-03T07:30:00+01:00")
    with pytest.raises(ValueError, match="offset"):
        parse_start_at("2026-12-03T06:30:00")
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_start_at("soon")


def test_cli_start_at_and_merge_min_overlap(refserver: RunningServer, tmp_path: Any) -> None:
    out = tmp_path / "r.json"
    start = time.time() + 0.5
    args = ["run", "--url", f"{refserver.url}/health", "--concurrency", "1", "--duration", "0.3"]
    assert main([*args, "--start-at", f"{start:.3f}", "-q", "-o", str(out)]) == 0
    level: LevelResult = loads_document(out.read_text()).levels[0]
    assert level.start_at_unix_ns == parse_start_at(f"{start:.3f}")
    assert main([*args, "--start-at", "later", "-q"]) == 2
    merged = tmp_path / "m.json"
    assert main(["merge", str(out), str(out), "--min-overlap", "0.5", "-o", str(merged), "-q"]) == 0
    assert loads_document(merged.read_text()).levels[0].overlap == 1.0


def test_plain_observers_are_no_gates() -> None:
    assert not isinstance(RunObserver(), GateObserver)
