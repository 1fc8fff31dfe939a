"""The recoverySeconds KPI (``readiness.drill.kpi.recovery_kpi``) at each of its boundaries: a
fault after which no client saw a failure did not bite, so no recovery was measured
(Inconclusive ``NoOutageObserved``, never ``0.00 s ✅``); a measured recovery at the limit
passes and above it fails, at the warn band passes and above it warns; one never seen is a Fail."""

from __future__ import annotations

import pytest

from mcp_checks.api import Verdict, decide
from mcp_operator.api.drill import KpiThresholds
from mcp_operator.readiness.drill.kpi import FaultTiming, recovery_kpi, recovery_kpis

LIMITS = KpiThresholds(recovery_seconds=17, recovery_seconds_warn=10)


def _timing(recovery: float | None, outage: bool = True, fault: str = "mixed-0") -> FaultTiming:
    return FaultTiming(fault, "mixed", "podKill", recovery, outage)


@pytest.mark.parametrize("recovery", [0.0, None, 3.0])
def test_no_outage_is_no_evidence_of_recovery(recovery: float | None) -> None:
    row = recovery_kpi(_timing(recovery, outage=False), LIMITS)
    assert (row.name, row.fault, row.verdict, row.reason) == (
        "recoverySeconds",
        "mixed-0",
        Verdict.INCONCLUSIVE,
        "NoOutageObserved",
    )
    assert "no observable failure" in row.measured and "0.00" not in row.measured
    wire = row.to_wire()
    assert (wire["mark"], wire["verdict"], wire["fault"]) == ("?", "Inconclusive", "mixed-0")
    assert (wire["threshold"], wire["warn"], wire["evidence"]) == (
        "<= 17 s",
        "> 10 s",
        "podKill mixed-0 in mixed",
    )
    outcome = row.outcome()
    assert (outcome.name, outcome.outcome, outcome.reason) == (
        "kpi:recoverySeconds:mixed-0",
        Verdict.INCONCLUSIVE,
        "NoOutageObserved",
    )
    assert "no observable failure" in outcome.message
    assert not decide([outcome]).ready  # a drill whose fault did not bite is not Ready on it


@pytest.mark.parametrize(
    ("recovery", "verdict", "reason", "measured"),
    [
        (0.0, Verdict.PASS, "WithinThreshold", "0.00 s"),  # an outage that was over at once
        (9.99, Verdict.PASS, "WithinThreshold", "9.99 s"),
        (10.0, Verdict.PASS, "WithinThreshold", "10.00 s"),  # at the warn band: not above it
        (10.01, Verdict.WARN, "NearThreshold", "10.01 s"),
        (17.0, Verdict.WARN, "NearThreshold", "17.00 s"),  # at the limit: within it
        (17.01, Verdict.FAIL, "AboveThreshold", "17.01 s"),
        (None, Verdict.FAIL, "NeverRecovered", "never, within the drill"),
    ],
)
def test_a_measured_recovery_against_the_limit_and_the_warn_band(
    recovery: float | None, verdict: Verdict, reason: str, measured: str
) -> None:
    row = recovery_kpi(_timing(recovery), LIMITS)
    assert (row.verdict, row.reason, row.measured, row.fault) == (verdict, reason, measured, "mixed-0")
    assert row.evidence == "podKill mixed-0 in mixed"


def test_without_a_warn_band_the_limit_alone_decides() -> None:
    limits = KpiThresholds(recovery_seconds=17)
    at = recovery_kpi(_timing(17.0), limits)
    assert (at.verdict, at.warn, at.threshold) == (Verdict.PASS, "", "<= 17 s")
    assert recovery_kpi(_timing(17.01), limits).verdict == Verdict.FAIL
    assert recovery_kpi(_timing(0.0, outage=False), limits).warn == ""


def test_one_row_per_fault_in_order() -> None:
    rows = recovery_kpis([_timing(3.0, fault="a"), _timing(0.0, outage=False, fault="b")], LIMITS)
    assert [(r.fault, r.verdict) for r in rows] == [("a", Verdict.PASS), ("b", Verdict.INCONCLUSIVE)]
    assert recovery_kpis([], LIMITS) == []
