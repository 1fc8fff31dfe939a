from __future__ import annotations

import random

import pytest

from mcp_bench.results.histogram import HistogramDecodeError, LatencyHistogram


def _values(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [int(rng.lognormvariate(16.5, 0.6)) for _ in range(n)]  # ~15 ms median, in ns


def test_percentiles_within_resolution() -> None:
    values = sorted(_values(1, 20_000))
    h = LatencyHistogram()
    for v in values:
        h.record_ns(v)
    assert h.count == len(values)
    for p in (50.0, 90.0, 99.0):
        exact_ms = values[int(len(values) * p / 100) - 1] / 1e6
        got = h.percentile_ms(p)
        assert got is not None
        assert abs(got - exact_ms) <= exact_ms * 0.002 + 0.001
    mean = sum(values) / len(values) / 1e6
    assert h.mean_ms() == pytest.approx(mean, rel=0.002)


def test_merge_is_exact() -> None:
    a, b = _values(2, 5_000), _values(3, 7_000)
    whole, ha, hb = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for v in a:
        whole.record_ns(v)
        ha.record_ns(v)
    for v in b:
        whole.record_ns(v)
        hb.record_ns(v)
    merged = LatencyHistogram.decode(ha.encode())
    merged.merge(LatencyHistogram.decode(hb.encode()))
    assert merged.count == whole.count
    assert merged.percentiles_ms() == whole.percentiles_ms()
    assert merged.max_ms() == whole.max_ms() and merged.min_ms() == whole.min_ms()


def test_nanosecond_unit_and_roundtrip() -> None:
    h = LatencyHistogram("ns")
    h.record_ns(1_234)
    assert h.percentile_ms(50) == pytest.approx(0.001234, rel=0.001)
    back = LatencyHistogram.decode(h.encode())
    assert back.unit == "ns" and back.count == 1
    with pytest.raises(ValueError, match="cannot merge"):
        LatencyHistogram("us").merge(back)


def test_clamping_is_counted() -> None:
    h = LatencyHistogram()
    h.record_ns(-5)
    h.record_ns(10 * 3600 * 10**9)
    assert h.count == 2 and h.clamped == 2
    assert LatencyHistogram.decode(h.encode()).clamped == 2


def test_empty_histogram_reports_none() -> None:
    h = LatencyHistogram()
    assert h.percentile_ms(50) is None and h.mean_ms() is None and h.percentiles_ms() == {}
    assert LatencyHistogram.decode(h.encode()).count == 0


@pytest.mark.parametrize("text", ["", "us:0:notbase64!!", "xx:0:HISTFAAAACR4", "garbage"])
def test_decode_rejects_garbage(text: str) -> None:
    with pytest.raises(HistogramDecodeError):
        LatencyHistogram.decode(text)


def test_mean_over_non_empty_buckets_equals_hdrh_mean() -> None:
    rng = random.Random(7)
    for unit in ("us", "ns"):
        hist = LatencyHistogram(unit)  # type: ignore[arg-type]
        for _ in range(5000):
            hist.record_ns(rng.randint(10_000, 900_000_000))
        assert hist.mean_ms() == hist._to_ms(hist._hist.get_mean_value())
