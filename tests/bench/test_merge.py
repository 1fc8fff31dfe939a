from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.results import (
    EngineFingerprint,
    MergeError,
    ResultDocument,
    dumps_document,
    loads_document,
    merge_documents,
)
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta

PLAN = RunPlan.from_dict(
    {
        "url": "http://127.0.0.1:1/",
        "levels": {"rate": [50.0, 100.0]},
        "stage": {"duration_s": 1},
        "slo": {"latency_p99_ms": 40},
    }
)
MS = 1_000_000


def _records(seed: int, base_ns: int, n: int) -> list[RequestRecord]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sched = base_ns + i * 7 * MS
        sent = sched + int(rng.uniform(0, 2) * MS)
        err = ErrorKind.HTTP_STATUS if rng.random() < 0.05 else None
        out.append(
            RequestRecord(
                sent_ns=sent, end_ns=sent + int(rng.lognormvariate(17, 0.5)), scheduled_ns=sched, error=err
            )
        )
    return out


def _doc(shard_records: list[list[RequestRecord]]) -> ResultDocument:
    levels = []
    for index, recs in enumerate(shard_records):
        acc = LevelAccumulator(PLAN.slo, open_loop=True, late_after_ns=MS)
        for r in recs:
            acc.add(r)
        meta = LevelMeta(index=index, mode="open", requested_rate=PLAN.levels.rate[index])  # type: ignore[index]
        levels.append(acc.to_result(meta))
    t = datetime.now(UTC)
    return ResultDocument(started_at=t, ended_at=t, engine=EngineFingerprint(), plan=PLAN, levels=levels)


def test_merge_equals_one_big_run() -> None:
    a = [_records(1, 0, 300), _records(2, 10**10, 200)]
    b = [_records(3, 5 * MS, 400), _records(4, 10**10 + 3 * MS, 100)]
    shard_a = loads_document(dumps_document(_doc(a)))
    shard_b = loads_document(dumps_document(_doc(b)))
    merged = merge_documents([shard_a, shard_b])
    # The "truth": one accumulator that saw every record of the level.
    whole = _doc([a[0] + b[0], a[1] + b[1]])
    assert merged.shards == 2
    for m, w in zip(merged.levels, whole.levels, strict=True):
        assert (m.sent, m.completed, m.failed, m.late, m.good) == (
            w.sent,
            w.completed,
            w.failed,
            w.late,
            w.good,
        )
        assert m.errors == w.errors
        assert m.latency == w.latency  # percentiles identical, not averaged
        assert m.first_start_unix_ns == w.first_start_unix_ns and m.last_end_unix_ns == w.last_end_unix_ns
        assert m.throughput_rps == pytest.approx(w.throughput_rps)
        assert m.slo == w.slo
        assert m.shards == 2
    assert merged.levels[0].requested_rate == 100.0  # 50/s from each shard
    # merged document survives its own checksum
    assert loads_document(dumps_document(merged)).levels[1].completed == whole.levels[1].completed


def test_merge_refuses_mismatched_shards() -> None:
    one = _doc([_records(1, 0, 10), _records(2, 0, 10)])
    fewer = one.model_copy(update={"levels": one.levels[:1]})
    with pytest.raises(MergeError, match="level counts"):
        merge_documents([one, fewer])
    with pytest.raises(MergeError, match="nothing"):
        merge_documents([])
