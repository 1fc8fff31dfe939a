"""The drill's pure parts: the MCP2026 profile, the journal, and the KPI board."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_checks.verdict import Verdict
from mcp_operator.api.drill import DrillSpec, KpiThresholds
from mcp_operator.readiness.drill import journal as jr
from mcp_operator.readiness.drill.kpi import FaultTiming, Jump, board, jump_points, success_kpi
from mcp_operator.readiness.drill.load import StageFigures, WindowFigures
from mcp_operator.readiness.drill.profile import expand
from mcp_operator.readiness.drill.stageplan import stage_plan

T0 = "2026-01-01T00:00:00Z"


def _figures(
    p99: float,
    windows: list[float | None],
    completed: int = 100,
    errors: int = 0,
    window_errors: list[int] | None = None,
    client_bound: tuple[str, ...] = (),
    dropped: int = 0,
) -> StageFigures:
    failed = window_errors or [0] * len(windows)
    return StageFigures(
        requested="10 req/s",
        achieved_rps=10.0,
        p50_ms=p99 / 2,
        p99_ms=p99,
        completed=completed,
        errors=errors,
        windows=tuple(
            WindowFigures(i * 5.0, w, 100, e) for i, (w, e) in enumerate(zip(windows, failed, strict=True))
        ),
        dropped=dropped,
        client_bound=client_bound,
    )


def _rows(stages: list[tuple[str, StageFigures]], thresholds: KpiThresholds, ok: int = 1) -> dict[str, Any]:
    """The board over ``stages`` alone (no faults, no hot updates), by KPI name."""
    rows = board(ok=ok, total=ok, stages=stages, recoveries=[], hot_updates=[], thresholds=thresholds)
    return {r.name: r for r in rows}


def test_mcp2026_expands_to_the_reference_rates_scaled() -> None:
    full = expand(DrillSpec.model_validate({"profile": "MCP2026"}))
    assert [(s.name, s.load.rate, s.load.duration_seconds) for s in full if s.load] == [
        ("baseline", 500.0, 60.0),
        ("mixed", 3200.0, 60.0),
        ("spike", 8960.0, 90.0),  # +180% of mixed, for 90 s
    ]
    small = expand(DrillSpec.model_validate({"profile": "MCP2026", "scale": 0.01}))
    assert [s.load.rate for s in small if s.load] == [5.0, 32.0, 89.6]
    assert all(s.load.duration_seconds >= 1.0 for s in small if s.load)  # still measures something


def test_a_profile_stage_named_in_the_spec_carries_its_faults() -> None:
    spec = DrillSpec.model_validate(
        {
            "profile": "MCP2026",
            "scale": 0.01,
            "stages": [
                {"name": "spike", "faults": [{"kind": "scaleDown", "workload": "srv", "replicas": 1}]}
            ],
        }
    )
    stages = {s.name: s for s in expand(spec)}
    assert [f.kind for f in stages["spike"].faults] == ["scaleDown"]
    assert stages["spike"].load is not None and stages["spike"].load.rate == 89.6


def test_load_plan_splits_the_stage_into_windows() -> None:
    spec = DrillSpec.model_validate(
        {
            "stages": [
                {"name": "s", "load": {"rate": 50, "durationSeconds": 12, "windowSeconds": 5, "path": "/x"}}
            ]
        }
    )
    load = spec.stages[0].load
    assert load is not None
    plan = stage_plan(load, "http://svc:8000/")
    assert plan.url == "http://svc:8000/x"
    assert plan.levels.rate == [50.0, 50.0, 50.0] and plan.stage.duration_s == pytest.approx(4.0)
    assert (plan.levels.arrival, plan.levels.overload, plan.request_timeout_s) == ("poisson", "drop", 5.0)


def test_journal_keeps_undo_and_knows_what_is_open() -> None:
    journal = jr.planned(
        [],
        fault_id="f1",
        stage="s",
        kind="scaleDown",
        target="Deployment ns/srv",
        undo={"replicas": 3},
        now=T0,
    )
    journal = jr.skipped(journal, fault_id="f2", stage="s", kind="podKill", message="NothingSelected", now=T0)
    assert [e["id"] for e in jr.open_entries(journal)] == ["f1"]
    assert jr.undo_of(jr.record(journal[0])) == {"replicas": 3}
    assert not jr.all_reverted(journal)
    journal = jr.updated(journal, "f1", phase="Reverted", reverted_at=T0)
    assert jr.open_entries(journal) == [] and jr.all_reverted(journal)
    assert jr.all_reverted(jr.updated(journal, "f1", phase="RevertFailed")) is False


def _faults_reverted(conditions: list[dict[str, object]]) -> dict[str, object]:
    (found,) = [c for c in conditions if c["type"] == "FaultsReverted"]
    return found


def test_an_ended_drill_says_what_its_journal_shows() -> None:
    """Aborted, interrupted or failed: FaultsReverted True only when every entry is Reverted or
    Skipped; False names each fault left (issue 12)."""
    journal = jr.planned(
        [], fault_id="f1", stage="s", kind="scaleDown", target="Deployment ns/srv", undo={}, now=T0
    )
    journal = jr.skipped(journal, fault_id="f2", stage="s", kind="podKill", message="NothingSelected", now=T0)
    assert _faults_reverted(jr.revert_condition([], [], 3, T0))["message"] == "no fault was injected"
    done = _faults_reverted(jr.revert_condition([], jr.updated(journal, "f1", phase="Reverted"), 3, T0))
    assert (done["status"], done["reason"], done["observedGeneration"]) == ("True", "Reverted", 3)
    failed = jr.updated(journal, "f1", phase="RevertFailed")
    left = _faults_reverted(jr.revert_condition([], failed, 3, T0))
    assert (left["status"], left["reason"]) == ("False", "RevertFailed")
    assert "scaleDown Deployment ns/srv (RevertFailed)" in str(left["message"])
    assert "podKill" not in str(left["message"])  # skipped: never applied, nothing to undo
    assert "(Planned)" in str(_faults_reverted(jr.revert_condition([], journal, 3, T0))["message"])


def test_success_kpi_never_passes_on_too_few_samples() -> None:
    t = KpiThresholds()  # 99.99%: 10,000 requests are needed to verify it
    assert success_kpi(0, 0, t).verdict == Verdict.INCONCLUSIVE
    assert success_kpi(500, 500, t).reason == "InsufficientSamples"
    assert success_kpi(20_000, 20_000, t).verdict == Verdict.PASS
    assert success_kpi(19_990, 20_000, t).verdict == Verdict.FAIL
    warned = success_kpi(
        19_999, 20_000, KpiThresholds(health_success_ratio=0.999, health_success_ratio_warn=0.99999)
    )
    assert warned.verdict == Verdict.WARN and warned.to_wire()["mark"] == "!"


def test_recovery_rows_one_per_fault_and_hot_update_rows() -> None:
    """A pod kill and a zone outage each get their own recoverySeconds row and verdict."""
    t = KpiThresholds(recovery_seconds=17, recovery_seconds_warn=10, hot_update_seconds=2.5)
    rows = board(
        ok=20_000,
        total=20_000,
        stages=[],
        recoveries=[
            FaultTiming("a", "s1", "podKill", 3.0, True),
            FaultTiming("b", "s2", "zoneOutage", 12.5, True),
        ],
        hot_updates=[
            ("c", "configHotUpdate c in s1 (rollout)", 1.2),
            ("d", "configHotUpdate d in s2 (in place)", 0.8),
        ],
        thresholds=t,
    )
    recovery = {r.fault: r for r in rows if r.name == "recoverySeconds"}
    assert set(recovery) == {"a", "b"}
    assert (recovery["a"].verdict, recovery["a"].measured) == (Verdict.PASS, "3.00 s")
    assert (recovery["b"].verdict, recovery["b"].measured) == (Verdict.WARN, "12.50 s")
    assert "zoneOutage b" in recovery["b"].evidence and recovery["b"].to_wire()["fault"] == "b"
    assert {o.name for o in (r.outcome() for r in rows)} >= {"kpi:recoverySeconds:a", "kpi:recoverySeconds:b"}
    hot = {r.fault: r for r in rows if r.name == "hotUpdateSeconds"}
    assert set(hot) == {"c", "d"} and all(r.verdict == Verdict.PASS for r in hot.values())
    assert "(in place)" in hot["d"].evidence and "(rollout)" in hot["c"].evidence  # the KPI names which
    never = board(
        ok=1,
        total=1,
        stages=[],
        recoveries=[FaultTiming("a", "s", "podKill", None, True)],
        hot_updates=[("x", "configHotUpdate x in s (in place)", None)],
        thresholds=t,
    )
    assert {r.name: r.reason for r in never}["recoverySeconds"] == "NeverRecovered"
    assert {r.name: r.verdict for r in never}["hotUpdateSeconds"] == Verdict.FAIL
    too_slow = board(
        ok=1,
        total=1,
        stages=[],
        recoveries=[FaultTiming("a", "s", "podKill", 20.0, True)],
        hot_updates=[],
        thresholds=t,
    )
    assert {r.name: r.verdict for r in too_slow}["recoverySeconds"] == Verdict.FAIL


def test_the_jump_point_is_the_first_window_past_the_factor() -> None:
    stages = [("baseline", _figures(10.0, [9.0, 10.0])), ("spike", _figures(80.0, [12.0, 45.0, 80.0]))]
    assert jump_points(stages, 3.0) == [Jump("spike", 5.0, 45.0, 10.0, 0, 100)]
    assert jump_points(stages, 10.0) == []
    rows = _rows(stages, KpiThresholds(p99_jump_factor=3.0))
    assert rows["p99JumpPoint"].verdict == Verdict.WARN and "spike at 5.0 s" in rows["p99JumpPoint"].measured


def test_every_stage_is_judged_and_a_jumped_stage_is_no_baseline() -> None:
    """mixed jumps (P99 40 ms against baseline 10 ms); spike at P99 424 ms with 23 errors is
    judged against baseline's 10 ms too, not against the jumped mixed stage, and listed."""
    stages = [
        ("baseline", _figures(10.0, [9.0, 10.0])),
        ("mixed", _figures(200.0, [40.0, 200.0])),
        ("spike", _figures(424.0, [424.0, 300.0], errors=23, window_errors=[23, 0])),
    ]
    jumps = jump_points(stages, 3.0)
    assert [(j.stage, j.offset_s) for j in jumps] == [("mixed", 0.0), ("spike", 0.0)]
    assert jumps[1].p99_ms is None and jumps[1].errors == 23  # 23 of 123 failed: P99 is a failure
    row = _rows(stages, KpiThresholds(p99_jump_factor=3.0))["p99JumpPoint"]
    assert "mixed at 0.0 s" in row.measured and "spike at 0.0 s: 23 of 123 requests failed" in row.measured


def test_a_full_outage_whose_failures_are_fast_is_a_jump() -> None:
    """Every request of the outage window failed in 1 ms: the window's P99 of what completed is
    fast or absent, but the P99 request failed."""
    stages = [
        ("baseline", _figures(10.0, [9.0, 10.0])),
        ("outage", _figures(9.0, [9.0, None], errors=100, window_errors=[0, 100])),
    ]
    (jump,) = jump_points(stages, 3.0)
    assert (jump.stage, jump.offset_s, jump.p99_ms) == ("outage", 5.0, None)
    one_in_a_thousand = [
        ("baseline", _figures(10.0, [10.0])),
        ("s", _figures(10.0, [10.0], window_errors=[1])),
    ]
    assert jump_points(one_in_a_thousand, 3.0) == []  # 1 of 101 is within the 1 % a P99 allows


def test_a_busy_client_whose_findings_stand_passes_and_drops_are_not_failures() -> None:
    """A client near a full core made no finding of its stage (no jump there): the findings
    stand, the row says the client was busy; drops are counted, never failures."""
    bound = _figures(10.0, [10.0], client_bound=("at 0 s: worker 0: CPU 98% of a core > 90%",), dropped=40)
    load = _rows([("baseline", _figures(10.0, [10.0])), ("spike", bound)], KpiThresholds(), ok=100)[
        "loadGenerator"
    ]
    assert (load.verdict, load.reason) == (Verdict.PASS, "ClientBusyFindingsStand")
    assert "spike: at 0 s: worker 0: CPU 98%" in load.measured and "40 arrivals dropped" in load.measured
    kept = _rows([("s", _figures(10.0, [10.0], dropped=3))], KpiThresholds())
    assert (kept["loadGenerator"].verdict, kept["loadGenerator"].reason) == (Verdict.PASS, "ClientKeptUp")


def test_a_drill_that_ended_early_leaves_no_stage_running_or_pending() -> None:
    from mcp_operator.readiness.drill.summary import ended_stages

    stages = [
        {"name": "a", "phase": "Done"},
        {"name": "b", "phase": "Running"},
        {"name": "c", "phase": "Pending"},
    ]
    assert [s["phase"] for s in ended_stages(stages)] == ["Done", "Stopped", "Skipped"]
    assert stages[1]["phase"] == "Running"  # pure: the input is left as it was
