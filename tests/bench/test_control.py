from __future__ import annotations

from mcp_bench.load.control import LevelControl
from mcp_bench.plan import CircuitBreaker, StabilityRule
from mcp_bench.records import ErrorKind, RequestRecord

MS = 1_000_000


def _rec(end_ms: float, error: ErrorKind | None = None, latency_ms: float = 5.0) -> RequestRecord:
    end = int(end_ms * MS)
    return RequestRecord(sent_ns=end - int(latency_ms * MS), end_ns=end, error=error)


def test_breaker_consecutive_errors_resets_on_success() -> None:
    c = LevelControl(breaker=CircuitBreaker(consecutive_errors=3))
    for t, err in enumerate(
        [ErrorKind.TIMEOUT, ErrorKind.TIMEOUT, None, ErrorKind.TIMEOUT, ErrorKind.TIMEOUT]
    ):
        c.observe(_rec(t, err))
    assert not c.stopped
    c.observe(_rec(6, ErrorKind.CONNECT))
    assert c.stopped and c.stop_reason == "breaker"
    _, brk = c.report()
    assert (
        brk is not None
        and brk["tripped"]
        and brk["max_consecutive_errors"] == 3
        and "connect" in brk["detail"]
    )


def test_breaker_error_rate_over_a_window() -> None:
    c = LevelControl(breaker=CircuitBreaker(error_rate=0.2, window_s=0.1, min_requests=10))
    # window 0: 10% errors -> fine; window 1: 50% errors -> trips when window 2 begins
    for i in range(20):
        c.observe(_rec(i * 5, ErrorKind.HTTP_STATUS if i % 10 == 0 else None))
    assert not c.stopped
    for i in range(20):
        c.observe(_rec(100 + i * 4, ErrorKind.HTTP_STATUS if i % 2 else None))
    c.observe(_rec(205))
    assert c.stopped and c.stop_reason == "breaker"
    assert c.report()[1]["worst_window_error_rate"] == 0.5  # type: ignore[index]


def test_stability_needs_agreeing_windows() -> None:
    c = LevelControl(stability=StabilityRule(window_s=0.1, windows=3, tolerance=0.1))
    t = 0.0
    for per_window in (5, 20, 30, 31, 30):  # ramp-up, then steady
        for k in range(per_window):
            c.observe(_rec(t + k * 100 / per_window))
        t += 100
    assert not c.stopped  # the last steady window is not closed yet
    c.observe(_rec(t + 1))
    assert c.stopped and c.stop_reason == "stability"
    stab, brk = c.report()
    assert (
        brk is None and stab is not None and stab["stable"] and stab["windows"][-3:] == [300.0, 310.0, 300.0]
    )


def test_no_rules_never_stop() -> None:
    c = LevelControl()
    assert not c.active
    assert c.report() == (None, None)
