"""Early stop of a level: the stability rule and the circuit breaker, both reported in the result.

Both judge fixed windows of request end times. They see every measured record, so they run in
the hot path only when the plan asks for them.
"""

from __future__ import annotations

from typing import Any

from mcp_bench.plan import CircuitBreaker, StabilityRule
from mcp_bench.records import RequestRecord


class LevelControl:
    """Holds the stop flag of one level and the rules that may raise it."""

    def __init__(self, stability: StabilityRule | None = None, breaker: CircuitBreaker | None = None) -> None:
        self.stability = stability
        self.breaker = breaker
        self.stopped = False
        self.stop_reason = ""
        self.stop_detail = ""
        self._start_ns: int | None = None
        # stability windows
        self._stab_window_ns = int(stability.window_s * 1e9) if stability else 0
        self._stab_index = 0
        self._stab_count = 0
        self._stab_latency_sum = 0
        self._stab_values: list[float] = []
        self._stable_at_s: float | None = None
        # breaker
        self._brk_window_ns = int(breaker.window_s * 1e9) if breaker else 0
        self._brk_index = 0
        self._brk_total = 0
        self._brk_errors = 0
        self._consecutive = 0
        self._max_consecutive = 0
        self._worst_rate: float | None = None

    @property
    def active(self) -> bool:
        return self.stability is not None or self.breaker is not None

    def stop(self, reason: str, detail: str = "") -> None:
        if not self.stopped:
            self.stopped = True
            self.stop_reason = reason
            self.stop_detail = detail

    def observe(self, rec: RequestRecord) -> None:
        if self._start_ns is None:
            self._start_ns = rec.end_ns
        if self.breaker is not None:
            self._observe_breaker(rec, self.breaker)
        if self.stability is not None and rec.error is None:
            self._observe_stability(rec, self.stability)

    def _observe_breaker(self, rec: RequestRecord, rule: CircuitBreaker) -> None:
        assert self._start_ns is not None
        if rec.error is None:
            self._consecutive = 0
        else:
            self._consecutive += 1
            self._max_consecutive = max(self._max_consecutive, self._consecutive)
            if rule.consecutive_errors is not None and self._consecutive >= rule.consecutive_errors:
                self.stop("breaker", f"{self._consecutive} consecutive errors (last: {rec.error.value})")
        index = (rec.end_ns - self._start_ns) // self._brk_window_ns
        if index != self._brk_index:
            self._close_breaker_window(rule)
            self._brk_index = index
        self._brk_total += 1
        self._brk_errors += rec.error is not None

    def _close_breaker_window(self, rule: CircuitBreaker) -> None:
        total, errors = self._brk_total, self._brk_errors
        self._brk_total = self._brk_errors = 0
        if rule.error_rate is None or total < rule.min_requests:
            return
        rate = errors / total
        self._worst_rate = rate if self._worst_rate is None else max(self._worst_rate, rate)
        if rate > rule.error_rate:
            self.stop("breaker", f"error rate {rate:.3f} > {rule.error_rate} over a {rule.window_s}s window")

    def _observe_stability(self, rec: RequestRecord, rule: StabilityRule) -> None:
        assert self._start_ns is not None
        index = (rec.end_ns - self._start_ns) // self._stab_window_ns
        while index > self._stab_index:
            self._close_stability_window(rule)
            self._stab_index += 1
        self._stab_count += 1
        self._stab_latency_sum += rec.end_ns - rec.sent_ns

    def _close_stability_window(self, rule: StabilityRule) -> None:
        n = self._stab_count
        if rule.metric == "throughput":
            value = n / rule.window_s
        else:
            value = self._stab_latency_sum / n / 1e6 if n else float("inf")
        self._stab_count = 0
        self._stab_latency_sum = 0
        self._stab_values.append(value)
        last = self._stab_values[-rule.windows :]
        if len(last) < rule.windows or any(v == float("inf") for v in last):
            return
        mean = sum(last) / len(last)
        if mean > 0 and (max(last) - min(last)) <= rule.tolerance * mean:
            self._stable_at_s = len(self._stab_values) * rule.window_s
            detail = f"last {rule.windows} windows of {rule.metric} within {rule.tolerance:.1%}"
            self.stop("stability", detail)

    def report(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(stability, breaker) sections of the level result; None for a rule not configured."""
        stability = None
        if self.stability is not None:
            stability = {
                "rule": self.stability.model_dump(),
                "stable": self._stable_at_s is not None,
                "stable_after_s": self._stable_at_s,
                "windows": [None if v == float("inf") else round(v, 6) for v in self._stab_values[-50:]],
            }
        breaker = None
        if self.breaker is not None:
            breaker = {
                "rule": self.breaker.model_dump(),
                "tripped": self.stop_reason == "breaker",
                "detail": self.stop_detail if self.stop_reason == "breaker" else "",
                "max_consecutive_errors": self._max_consecutive,
                "worst_window_error_rate": self._worst_rate,
            }
        return stability, breaker
