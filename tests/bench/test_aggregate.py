from __future__ import annotations

import pytest

from mcp_bench.plan import Slo
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta

MS = 1_000_000
OPEN = LevelMeta(index=0, mode="open", requested_rate=100.0)


def test_counts_rates_and_latencies_open_loop() -> None:
    acc = LevelAccumulator(Slo(), open_loop=True, late_after_ns=MS)
    # 100 requests scheduled 10 ms apart; each sent 0.5 ms late except every 10th, 3 ms late.
    for i in range(100):
        sched = i * 10 * MS
        lag = 3 * MS if i % 10 == 0 else MS // 2
        acc.add(RequestRecord(sent_ns=sched + lag, end_ns=sched + lag + 20 * MS, scheduled_ns=sched))
    acc.add(RequestRecord(sent_ns=5, end_ns=6, scheduled_ns=0, error=ErrorKind.TIMEOUT))
    acc.add_dropped()
    r = acc.to_result(OPEN)
    assert (r.sent, r.completed, r.failed, r.dropped, r.late) == (101, 100, 1, 1, 10)
    assert r.errors == {ErrorKind.TIMEOUT: 1, ErrorKind.DROPPED: 1}
    assert r.latency["e2e"].p50_ms == pytest.approx(20.0, rel=0.002)
    assert r.latency["e2e_from_schedule"].p99_ms == pytest.approx(23.0, rel=0.002)
    assert r.latency["e2e_from_schedule"].p50_ms == pytest.approx(20.5, rel=0.002)
    assert r.latency["schedule_lag"].count == 101
    # window: first send (5 ns) to last end (990 ms + 0.5 ms + 20 ms)
    assert r.throughput_rps == pytest.approx(100 / 1.0105, rel=1e-6)
    assert r.achieved_rate == pytest.approx(100 / 0.9905, rel=1e-3)
    assert r.goodput_rps is None  # no SLO declared, no goodput


def test_streaming_metrics_and_goodput() -> None:
    slo = Slo(latency_p99_ms=50, ttft_p99_ms=15)
    acc = LevelAccumulator(slo, open_loop=False, late_after_ns=MS)
    for i in range(10):
        start = i * 100 * MS
        ttft = 10 * MS if i < 8 else 20 * MS  # two requests miss the TTFT objective
        tokens = [start + ttft + k * 5 * MS for k in range(5)]
        acc.add(
            RequestRecord(
                sent_ns=start,
                end_ns=tokens[-1],
                first_token_ns=tokens[0],
                token_times_ns=tokens,
                output_tokens=5,
                input_tokens=7,
            )
        )
    r = acc.to_result(LevelMeta(index=0, mode="closed", concurrency=1))
    assert r.good == 8
    assert r.output_tokens == 50 and r.input_tokens == 70
    assert r.latency["itl"].count == 40 and r.latency["itl"].p50_ms == pytest.approx(5.0, rel=0.002)
    assert r.latency["tpot"].p50_ms == pytest.approx(5.0, rel=0.002)
    assert r.latency["ttft"].p90_ms == pytest.approx(20.0, rel=0.002)
    assert r.latency["schedule_lag"].count == 0  # closed loop has no schedule
    window_s = (9 * 100 + 20 + 20) / 1000
    assert r.goodput_rps == pytest.approx(8 / window_s)
    assert r.output_token_throughput == pytest.approx(50 / window_s)
    assert r.slo.passed is False  # ttft p99 is 20 ms > 15 ms
    assert {c.name: c.passed for c in r.slo.checks} == {"latency_p99_ms": True, "ttft_p99_ms": False}


def test_no_data_is_not_a_pass() -> None:
    acc = LevelAccumulator(Slo(latency_p99_ms=10, throughput_rps=1), open_loop=False, late_after_ns=MS)
    acc.add(RequestRecord(sent_ns=0, end_ns=MS, error=ErrorKind.CONNECT))
    r = acc.to_result(LevelMeta(index=0, mode="closed", concurrency=1))
    assert r.completed == 0
    assert r.slo.passed is False
    assert all(not c.passed for c in r.slo.checks)


def test_each_error_kind_keeps_its_first_detail_through_a_merge() -> None:
    """A count says how many failed; the first detail of each kind says why."""

    def failed(kind: ErrorKind, detail: str) -> RequestRecord:
        return RequestRecord(sent_ns=MS, end_ns=2 * MS, error=kind, error_detail=detail)

    shard_a = LevelAccumulator(Slo(), open_loop=True, late_after_ns=MS)
    shard_a.add(failed(ErrorKind.DISCONNECTED, "server closed the connection before answering (a)"))
    shard_a.add(failed(ErrorKind.DISCONNECTED, "server closed the connection before answering (b)"))
    shard_a.add(failed(ErrorKind.TIMEOUT, ""))  # no detail: nothing to show
    shard_b = LevelAccumulator(Slo(), open_loop=True, late_after_ns=MS)
    shard_b.add(failed(ErrorKind.HTTP_STATUS, "503"))
    shard_b.add(failed(ErrorKind.DISCONNECTED, "from shard b"))
    a, b = shard_a.to_result(OPEN), shard_b.to_result(OPEN)
    assert a.error_examples == {ErrorKind.DISCONNECTED: "server closed the connection before answering (a)"}
    merged = LevelAccumulator(Slo(), open_loop=True, late_after_ns=MS)
    merged.merge_result(a)
    merged.merge_result(b)
    result = merged.to_result(OPEN)
    assert result.errors == {ErrorKind.DISCONNECTED: 3, ErrorKind.HTTP_STATUS: 1, ErrorKind.TIMEOUT: 1}
    assert result.error_examples == {
        ErrorKind.DISCONNECTED: "server closed the connection before answering (a)",
        ErrorKind.HTTP_STATUS: "503",
    }
