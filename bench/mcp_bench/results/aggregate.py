"""Turn request records into a level result; the same code finalises merged shards.

The hot path (:meth:`LevelAccumulator.add`) does counters and histogram records only; percentile
tables, rates and SLO verdicts are computed once, in :meth:`LevelAccumulator.to_result`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from mcp_bench.plan import Slo
from mcp_bench.records import ConnectTime, ErrorKind, RequestRecord
from mcp_bench.results.document import CONNECTION_METRICS, METRICS, LevelResult, PercentileTable, TagResult
from mcp_bench.results.histogram import LatencyHistogram, Unit
from mcp_bench.results.slo import evaluate, latency_metric, request_latency_limit_ms
from mcp_common.redact import redact_text


@dataclass(frozen=True, slots=True)
class LevelMeta:
    index: int
    mode: Literal["closed", "open"]
    concurrency: int | None = None
    requested_rate: float | None = None


def unix_ns_to_datetime(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


TAG_METRICS: tuple[str, ...] = ("e2e", "e2e_from_schedule", "ttft")
MAX_TAG_VALUES = 64  # per tag key and level; further values are counted under "other"
OTHER_TAG_VALUE = "other"


class TagAccumulator:
    """Counters and histograms of the requests that carry one tag value (off the common path:
    only tagged records come here)."""

    __slots__ = ("completed", "failed", "first_latency_ns", "first_sent", "hists", "sent")

    def __init__(self, unit: Unit) -> None:
        self.hists = {m: LatencyHistogram(unit) for m in TAG_METRICS}
        self.sent = self.completed = self.failed = 0
        self.first_sent: int | None = None  # record instant (or Unix ns once merged)
        self.first_latency_ns: int | None = None

    def add(self, rec: RequestRecord) -> None:
        self.sent += 1
        sent = rec.sent_ns
        ok = rec.error is None
        if self.first_sent is None or sent < self.first_sent:
            self.first_sent = sent
            self.first_latency_ns = rec.end_ns - sent if ok else None
        if not ok:
            self.failed += 1
            return
        self.completed += 1
        self.hists["e2e"].record_ns(rec.end_ns - sent)
        if rec.scheduled_ns is not None:
            self.hists["e2e_from_schedule"].record_ns(rec.end_ns - rec.scheduled_ns)
        if rec.first_token_ns is not None:
            self.hists["ttft"].record_ns(rec.first_token_ns - sent)

    def merge_result(self, tag: TagResult) -> None:
        for metric in TAG_METRICS:
            hist = tag.histogram(metric)
            if hist is not None:
                self.hists[metric].merge(hist)
        self.sent += tag.sent
        self.completed += tag.completed
        self.failed += tag.failed
        first = tag.first_sent_unix_ns
        if first is not None and (self.first_sent is None or first < self.first_sent):
            self.first_sent = first
            self.first_latency_ns = (
                None if tag.first_latency_ms is None else round(tag.first_latency_ms * 1e6)
            )

    def to_result(self, offset_ns: int) -> TagResult:
        return TagResult(
            sent=self.sent,
            completed=self.completed,
            failed=self.failed,
            first_sent_unix_ns=None if self.first_sent is None else self.first_sent + offset_ns,
            first_latency_ms=None if self.first_latency_ns is None else self.first_latency_ns / 1e6,
            latency={m: PercentileTable.from_histogram(h) for m, h in self.hists.items() if h.count},
            histograms={m: h.encode() for m, h in self.hists.items() if h.count},
        )


class LevelAccumulator:
    """Counters and histograms of one level; ``offset_ns`` maps record instants to Unix ns."""

    def __init__(self, slo: Slo, open_loop: bool, late_after_ns: int, unit: Unit = "us") -> None:
        self.slo = slo
        self.open_loop = open_loop
        self.late_after_ns = late_after_ns
        self.hists = {m: LatencyHistogram(unit) for m in METRICS + CONNECTION_METRICS}
        self.connections: str | None = None
        self.new_connection_requests = 0
        self._e2e = self.hists["e2e"]
        self._e2e_sched = self.hists["e2e_from_schedule"]
        self._lag = self.hists["schedule_lag"]
        self._ttft = self.hists["ttft"]
        self._tpot = self.hists["tpot"]
        self._itl = self.hists["itl"]
        self.errors: Counter[ErrorKind] = Counter()
        self.error_examples: dict[ErrorKind, str] = {}
        self.sent = self.completed = self.failed = self.dropped = self.late = self.good = 0
        self.input_tokens = self.output_tokens = 0
        self.first_start: int | None = None
        self.last_end: int | None = None
        self.last_sent: int | None = None
        self.offset_ns = 0
        self.shards = 1
        self.unit: Unit = unit
        self.tags: dict[str, dict[str, TagAccumulator]] = {}
        limit = request_latency_limit_ms(slo)
        self._good_e2e_ns = None if limit is None else int(limit * 1e6)
        self._good_ttft_ns = None if slo.ttft_p99_ms is None else int(slo.ttft_p99_ms * 1e6)
        self._good_tpot_ns = None if slo.tpot_p99_ms is None else slo.tpot_p99_ms * 1e6
        self._good_from_schedule = latency_metric(slo, open_loop) == "e2e_from_schedule"

    # -- hot path -------------------------------------------------------------------------------
    def add(self, rec: RequestRecord) -> None:
        sent = rec.sent_ns
        end = rec.end_ns
        self.sent += 1
        if self.first_start is None or sent < self.first_start:
            self.first_start = sent
        if self.last_sent is None or sent > self.last_sent:
            self.last_sent = sent
        if self.last_end is None or end > self.last_end:
            self.last_end = end
        if rec.tags is not None:
            self._add_tagged(rec, rec.tags)
        if rec.new_connection:
            self.new_connection_requests += 1
        scheduled = rec.scheduled_ns
        if scheduled is not None:
            lag = sent - scheduled
            self._lag.record_ns(lag)
            if lag > self.late_after_ns:
                self.late += 1
        if rec.error is not None:
            self.failed += 1
            self.errors[rec.error] += 1
            if rec.error not in self.error_examples and rec.error_detail:
                # an error may quote the request's URL or headers; a result is passed around
                self.error_examples[rec.error] = redact_text(rec.error_detail)
            return
        self.completed += 1
        e2e = end - sent
        self._e2e.record_ns(e2e)
        if scheduled is not None:
            self._e2e_sched.record_ns(end - scheduled)
        self.input_tokens += rec.input_tokens
        self.output_tokens += rec.output_tokens
        ttft = None
        if rec.first_token_ns is not None:
            ttft = rec.first_token_ns - sent
            self._ttft.record_ns(ttft)
        tpot = rec.tpot_ns
        if tpot is not None:
            self._tpot.record_ns(tpot)
        times = rec.token_times_ns
        if len(times) > 1:
            itl = self._itl
            prev = times[0]
            for t in times[1:]:
                itl.record_ns(t - prev)
                prev = t
        judged = end - scheduled if scheduled is not None and self._good_from_schedule else e2e
        self._count_good(judged, ttft, tpot)

    def _count_good(self, latency_ns: int, ttft_ns: int | None, tpot_ns: float | None) -> None:
        if self._good_e2e_ns is not None and latency_ns > self._good_e2e_ns:
            return
        if self._good_ttft_ns is not None and (ttft_ns is None or ttft_ns > self._good_ttft_ns):
            return
        if self._good_tpot_ns is not None and (tpot_ns is None or tpot_ns > self._good_tpot_ns):
            return
        self.good += 1

    def _tag(self, key: str, value: str) -> TagAccumulator:
        values = self.tags.setdefault(key, {})
        acc = values.get(value)
        if acc is None:
            if len(values) >= MAX_TAG_VALUES and value != OTHER_TAG_VALUE:
                return self._tag(key, OTHER_TAG_VALUE)
            acc = values[value] = TagAccumulator(self.unit)
        return acc

    def _add_tagged(self, rec: RequestRecord, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self._tag(key, value).add(rec)

    def add_connections(self, times: list[ConnectTime]) -> None:
        """Connections opened for this level: their set-up time, apart from every request's."""
        connect, tls = self.hists["connect"], self.hists["tls"]
        for t in times:
            connect.record_ns(t.connect_ns)
            if t.tls_ns is not None:
                tls.record_ns(t.tls_ns)

    def add_dropped(self) -> None:
        """An arrival that was never sent (open loop, cap reached under the 'drop' policy)."""
        self.dropped += 1
        self.errors[ErrorKind.DROPPED] += 1

    # -- merging --------------------------------------------------------------------------------
    def merge_result(self, level: LevelResult) -> None:
        """Fold a finished level (e.g. another shard's) in; its instants are already Unix ns."""
        self.offset_ns = 0
        if self.connections is None:
            self.connections = level.connections
        for metric in METRICS + CONNECTION_METRICS:
            hist = level.histogram(metric)
            if hist is not None:
                self.hists[metric].merge(hist)
        for kind, n in level.errors.items():
            self.errors[ErrorKind(kind)] += n
        for kind, detail in level.error_examples.items():
            self.error_examples.setdefault(ErrorKind(kind), detail)
        self.sent += level.sent
        self.new_connection_requests += level.new_connection_requests
        self.completed += level.completed
        self.failed += level.failed
        self.dropped += level.dropped
        self.late += level.late
        self.good += level.good
        self.input_tokens += level.input_tokens
        self.output_tokens += level.output_tokens
        for key, values in (level.breakdown or {}).items():
            for value, tag in values.items():
                self._tag(key, value).merge_result(tag)
        self.first_start = _min(self.first_start, level.first_start_unix_ns)
        self.last_end = _max(self.last_end, level.last_end_unix_ns)
        self.last_sent = _max(self.last_sent, level.last_sent_unix_ns)

    # -- finalising -----------------------------------------------------------------------------
    def to_result(self, meta: LevelMeta, stop_reason: str = "") -> LevelResult:
        off = self.offset_ns
        first = None if self.first_start is None else self.first_start + off
        last_end = None if self.last_end is None else self.last_end + off
        last_sent = None if self.last_sent is None else self.last_sent + off
        window_s = (last_end - first) / 1e9 if first is not None and last_end is not None else 0.0

        def per_s(n: int) -> float | None:
            return n / window_s if window_s > 0 else None

        achieved = None
        if first is not None and last_sent is not None and self.sent > 1 and last_sent > first:
            achieved = (self.sent - 1) / ((last_sent - first) / 1e9)
        result = LevelResult(
            index=meta.index,
            mode=meta.mode,
            concurrency=meta.concurrency,
            requested_rate=meta.requested_rate,
            achieved_rate=achieved,
            started_at=None if first is None else unix_ns_to_datetime(first),
            ended_at=None if last_end is None else unix_ns_to_datetime(last_end),
            first_start_unix_ns=first,
            last_end_unix_ns=last_end,
            first_sent_unix_ns=first,
            last_sent_unix_ns=last_sent,
            sent=self.sent,
            completed=self.completed,
            failed=self.failed,
            dropped=self.dropped,
            late=self.late,
            errors=dict(sorted(self.errors.items())),
            error_examples=dict(sorted(self.error_examples.items())),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            good=self.good,
            throughput_rps=per_s(self.completed) if self.completed else (0.0 if window_s > 0 else None),
            output_token_throughput=per_s(self.output_tokens) if self.output_tokens else None,
            goodput_rps=per_s(self.good) if not self.slo.empty else None,
            latency={m: PercentileTable.from_histogram(h) for m, h in self.hists.items()},
            histograms={m: h.encode() for m, h in self.hists.items() if h.count},
            stop_reason=stop_reason,
            connections=self.connections,
            new_connection_requests=self.new_connection_requests,
            shards=self.shards,
            breakdown={
                key: {value: tag.to_result(off) for value, tag in sorted(values.items())}
                for key, values in sorted(self.tags.items())
            }
            or None,
        )
        result.slo = evaluate(self.slo, result, self.open_loop)
        return result


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
