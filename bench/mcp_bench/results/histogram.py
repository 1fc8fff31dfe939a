"""Latency histograms: HdrHistogram underneath, so shards and levels merge exactly.

Values are recorded as integers in one unit (microseconds by default, or nanoseconds) with three
significant figures, i.e. 0.1 % resolution and bounded memory whatever the request count. The
compact string form (HdrHistogram's compressed, base64 encoding prefixed with the unit) travels in
result documents; decoding and adding histograms gives the same percentiles as one run would have.
"""

from __future__ import annotations

from typing import Literal

from hdrh.histogram import HdrHistogram

Unit = Literal["us", "ns"]

_NS_PER_UNIT: dict[str, int] = {"us": 1_000, "ns": 1}
# One hour is the longest latency kept; longer values are clamped and counted as clamped.
_HIGHEST_NS = 3_600 * 1_000_000_000
SIGNIFICANT_FIGURES = 3
PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)


class HistogramDecodeError(ValueError):
    """An encoded histogram that is not ours or is corrupt."""


class LatencyHistogram:
    """A mergeable latency histogram recording durations given in nanoseconds."""

    __slots__ = ("_div", "_highest", "_hist", "clamped", "unit")

    def __init__(self, unit: Unit = "us", _hist: HdrHistogram | None = None) -> None:
        if unit not in _NS_PER_UNIT:
            raise ValueError(f"unit must be 'us' or 'ns', got {unit!r}")
        self.unit: Unit = unit
        self._div = _NS_PER_UNIT[unit]
        self._highest = _HIGHEST_NS // self._div
        self._hist = _hist if _hist is not None else HdrHistogram(1, self._highest, SIGNIFICANT_FIGURES)
        self.clamped = 0

    def record_ns(self, duration_ns: int | float) -> None:
        """Record one duration; negatives count as 0 and values over an hour as an hour."""
        value = int(duration_ns) // self._div
        if value < 0:
            value = 0
            self.clamped += 1
        elif value > self._highest:
            value = self._highest
            self.clamped += 1
        self._hist.record_value(value)

    def merge(self, other: LatencyHistogram) -> None:
        """Add another histogram in place; exact when units match (they must)."""
        if other.unit != self.unit:
            raise ValueError(f"cannot merge a {other.unit} histogram into a {self.unit} one")
        if other.count:
            self._hist.add(other._hist)
        self.clamped += other.clamped

    @property
    def count(self) -> int:
        return int(self._hist.get_total_count())

    def _to_ms(self, value: float) -> float:
        return value * self._div / 1e6

    def mean_ms(self) -> float | None:
        """HdrHistogram's mean (median-equivalent value of each bucket, weighted by its count),
        computed over the non-empty buckets only: hdrh's own iterator walks every bucket in
        Python and costs ~90 ms per histogram."""
        total = self.count
        if not total:
            return None
        hist = self._hist
        weighted = 0
        for index, count in enumerate(hist.counts):
            if count:
                value = hist.get_value_from_index(index)
                weighted += count * hist._hdr_median_equiv_value(value)
        return self._to_ms(weighted / total)

    def min_ms(self) -> float | None:
        return self._to_ms(self._hist.get_min_value()) if self.count else None

    def max_ms(self) -> float | None:
        return self._to_ms(self._hist.get_max_value()) if self.count else None

    def percentile_ms(self, percentile: float) -> float | None:
        return self._to_ms(self._hist.get_value_at_percentile(percentile)) if self.count else None

    def percentiles_ms(self, percentiles: tuple[float, ...] = PERCENTILES) -> dict[float, float]:
        """Several percentiles in one pass over the counts (empty dict when nothing was recorded)."""
        if not self.count:
            return {}
        values = self._hist.get_percentile_to_value_dict(list(percentiles))
        return {p: self._to_ms(values[p]) for p in percentiles}

    def encode(self) -> str:
        """``<unit>:<clamped>:<HdrHistogram compressed base64>``."""
        payload = self._hist.encode()
        text = payload.decode("ascii") if isinstance(payload, bytes) else str(payload)
        return f"{self.unit}:{self.clamped}:{text}"

    @classmethod
    def decode(cls, text: str) -> LatencyHistogram:
        try:
            unit, clamped, payload = text.split(":", 2)
            if unit not in _NS_PER_UNIT:
                raise ValueError(f"unknown unit {unit!r}")
            hist = HdrHistogram.decode(payload.encode("ascii"))
        except Exception as exc:  # hdrh raises assorted errors on corrupt input
            raise HistogramDecodeError(f"not an encoded latency histogram: {exc}") from exc
        out = cls(unit, _hist=hist)  # type: ignore[arg-type]
        out.clamped = int(clamped)
        return out

    def copy(self) -> LatencyHistogram:
        return LatencyHistogram.decode(self.encode())

    def __repr__(self) -> str:
        return f"LatencyHistogram(unit={self.unit!r}, count={self.count})"
