"""SLO checks per level: each declared objective becomes one check; no data never passes."""

from __future__ import annotations

from mcp_bench.plan import Slo
from mcp_bench.results.document import LevelResult, PercentileTable, SloCheck, SloVerdict


def latency_metric(slo: Slo, open_loop: bool) -> str:
    """Which latency the SLO judges: from the scheduled send in open loop unless told otherwise."""
    if slo.latency_from == "sent" or (slo.latency_from == "auto" and not open_loop):
        return "e2e"
    return "e2e_from_schedule" if open_loop else "e2e"


def request_latency_limit_ms(slo: Slo) -> float | None:
    """The per-request latency bound used for goodput: the tightest percentile target."""
    limits = [v for v in (slo.latency_p99_ms, slo.latency_p95_ms) if v is not None]
    return min(limits) if limits else None


def _at_most(name: str, target: float, actual: float | None, what: str) -> SloCheck:
    if actual is None:
        return SloCheck(name=name, target=target, actual=None, passed=False, detail=f"no data for {what}")
    return SloCheck(name=name, target=target, actual=actual, passed=actual <= target, detail=what)


def evaluate(slo: Slo, level: LevelResult, open_loop: bool) -> SloVerdict:
    if slo.empty:
        return SloVerdict(passed=None)
    metric = latency_metric(slo, open_loop)
    lat = level.latency.get(metric, PercentileTable())
    ttft = level.latency.get("ttft", PercentileTable())
    tpot = level.latency.get("tpot", PercentileTable())
    checks: list[SloCheck] = []
    if slo.latency_p99_ms is not None:
        checks.append(_at_most("latency_p99_ms", slo.latency_p99_ms, lat.p99_ms, f"{metric} p99"))
    if slo.latency_p95_ms is not None:
        checks.append(_at_most("latency_p95_ms", slo.latency_p95_ms, lat.p95_ms, f"{metric} p95"))
    if slo.latency_mean_ms is not None:
        checks.append(_at_most("latency_mean_ms", slo.latency_mean_ms, lat.mean_ms, f"{metric} mean"))
    if slo.ttft_p99_ms is not None:
        checks.append(_at_most("ttft_p99_ms", slo.ttft_p99_ms, ttft.p99_ms, "ttft p99"))
    if slo.tpot_p99_ms is not None:
        checks.append(_at_most("tpot_p99_ms", slo.tpot_p99_ms, tpot.p99_ms, "tpot p99"))
    if slo.max_error_rate is not None:
        attempts = level.sent + level.dropped
        rate = (level.failed + level.dropped) / attempts if attempts else None
        checks.append(_at_most("max_error_rate", slo.max_error_rate, rate, "failed+dropped / offered"))
    if slo.throughput_rps is not None:
        actual = level.throughput_rps
        checks.append(
            SloCheck(
                name="throughput_rps",
                target=slo.throughput_rps,
                actual=actual,
                passed=actual is not None and actual >= slo.throughput_rps,
                detail="completed requests/s (at least)" if actual is not None else "no data for throughput",
            )
        )
    return SloVerdict(passed=all(c.passed for c in checks), checks=checks)


def overall(levels: list[LevelResult]) -> bool | None:
    """All levels must pass; None when no level declared an SLO."""
    verdicts = [lv.slo.passed for lv in levels if lv.slo.passed is not None]
    if not verdicts:
        return None
    return all(verdicts)
