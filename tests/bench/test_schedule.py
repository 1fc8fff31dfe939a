from __future__ import annotations

import itertools
import statistics

import pytest

from mcp_bench.load.schedule import arrival_schedule
from mcp_bench.plan import Arrival


def _gaps_s(offsets: list[int]) -> list[float]:
    return [(b - a) / 1e9 for a, b in itertools.pairwise(offsets)]


def test_constant_is_evenly_spaced_with_warmup() -> None:
    s = arrival_schedule(100.0, "constant", warmup_s=0.5, duration_s=2.0)
    assert s.warmup_count == 50 and s.measured_count == 200
    gaps = _gaps_s(list(s.offsets_ns))
    assert max(gaps) - min(gaps) < 1e-6
    assert all(o >= 0.5e9 for o in list(s.offsets_ns)[s.warmup_count :])


def test_request_count_bounds_the_schedule() -> None:
    s = arrival_schedule(1000.0, "poisson", requests=123)
    assert s.measured_count == 123 and s.warmup_count == 0
    s2 = arrival_schedule(10.0, "constant", requests=1000, duration_s=1.0)
    assert s2.measured_count == 10  # whichever ends first


def test_poisson_mean_rate_and_dispersion() -> None:
    s = arrival_schedule(500.0, "poisson", seed=7, duration_s=20.0)
    assert s.measured_count == pytest.approx(10_000, rel=0.05)
    gaps = _gaps_s(list(s.offsets_ns))
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv == pytest.approx(1.0, abs=0.05)  # exponential gaps


@pytest.mark.parametrize("shape", [0.25, 4.0])
def test_gamma_burstiness_sets_dispersion(shape: float) -> None:
    s = arrival_schedule(500.0, "gamma", burstiness=shape, seed=3, duration_s=20.0)
    gaps = _gaps_s(list(s.offsets_ns))
    assert statistics.fmean(gaps) == pytest.approx(1 / 500, rel=0.05)
    cv2 = statistics.pvariance(gaps) / statistics.fmean(gaps) ** 2
    assert cv2 == pytest.approx(1 / shape, rel=0.15)


def test_seed_replays_and_changes() -> None:
    a = arrival_schedule(100.0, "poisson", seed=1, duration_s=1.0).offsets_ns
    b = arrival_schedule(100.0, "poisson", seed=1, duration_s=1.0).offsets_ns
    c = arrival_schedule(100.0, "poisson", seed=2, duration_s=1.0).offsets_ns
    assert a == b and a != c


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        arrival_schedule(0.0, "constant", duration_s=1)
    with pytest.raises(ValueError):
        arrival_schedule(1.0, "constant")


@pytest.mark.parametrize(
    ("rate", "warmup_s", "duration_s", "ramp_s"),
    [(87.5, 0.0, 1.5, 0.0), (560.0, 0.0, 1.5, 0.0), (1568.0, 0.0, 2.25, 0.0), (40.0, 2.0, 3.0, 1.0)],
)
@pytest.mark.parametrize("arrival", ["poisson", "gamma"])
def test_a_window_offers_its_rate_times_its_time(
    rate: float, warmup_s: float, duration_s: float, ramp_s: float, arrival: Arrival
) -> None:
    """Every seed's level sends rate x time within one (the ramp's share taken off): a free
    Poisson count strays by its square root, and a seed repeats the stray in every run (the
    drill's 175/s baseline sent 152/s, the same in runs days apart)."""
    ramped = ramp_s / 2  # the arrivals a linear ramp leaves out, in seconds of the full rate
    for seed in range(25):
        s = arrival_schedule(
            rate, arrival, burstiness=0.5, seed=seed, warmup_s=warmup_s, duration_s=duration_s, ramp_s=ramp_s
        )
        assert abs(s.measured_count - rate * duration_s) < 1
        assert abs(s.warmup_count - rate * max(0.0, warmup_s - ramped)) < 1
        offsets = list(s.offsets_ns)
        assert offsets == sorted(offsets) and offsets[0] == 0
        assert offsets[s.warmup_count] >= warmup_s * 1e9 - 1 and offsets[-1] < (warmup_s + duration_s) * 1e9
