"""Metrics the alerts rely on: a fault whose revert fails is counted (the drill's own revert and
the journal replay), series exist at 0 before their first event, a deleted gate's series goes."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from mcp_operator import metrics
from mcp_operator.handlers.monitoring import forget_deleted_gate
from mcp_operator.readiness.drill import journal as jr
from mcp_operator.readiness.drill import run as drill_run

T0 = "2026-01-01T00:00:00Z"


def _failures(kind: str) -> float:
    value = REGISTRY.get_sample_value("mcp_operator_fault_revert_failures_total", {"kind": kind})
    assert value is not None  # exists from the start
    return value


def _journal(kind: str) -> jr.Journal:
    return jr.planned([], fault_id="f1", stage="s", kind=kind, target="t", undo={"replicas": 3}, now=T0)


async def test_replay_counts_a_revert_that_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(kind: str, undo: Any, api: Any) -> str:
        raise RuntimeError("API server gone")

    before = _failures("scaleDown")
    monkeypatch.setattr(drill_run, "revert_fault", broken)
    journal = await drill_run.replay_journal(_journal("scaleDown"), api=None)  # type: ignore[arg-type]
    assert journal[0]["phase"] == "RevertFailed"
    assert _failures("scaleDown") == before + 1


async def test_replay_does_not_count_a_revert_that_works(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fine(kind: str, undo: Any, api: Any) -> str:
        return "scaled back"

    before = _failures("podKill")
    monkeypatch.setattr(drill_run, "revert_fault", fine)
    journal = await drill_run.replay_journal(_journal("podKill"), api=None)  # type: ignore[arg-type]
    assert journal[0]["phase"] == "Reverted" and _failures("podKill") == before


async def test_the_drills_own_revert_counts_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(kind: str, undo: Any, api: Any) -> str:
        raise RuntimeError("forbidden")

    writes: list[dict[str, Any]] = []

    async def write_status(fields: dict[str, Any]) -> None:
        writes.append(fields)

    monkeypatch.setattr(drill_run, "revert_fault", broken)
    monkeypatch.setattr(drill_run, "REVERT_BACKOFF_S", (0.0, 0.0))  # three tries, no wait
    drill = _drill(write_status)
    drill.state = drill_run._State(stages=[], journal=_journal("nodeDrain"))
    before = _failures("nodeDrain")
    await drill._revert("f1")
    assert drill.state.journal[0]["phase"] == "RevertFailed" and writes
    assert _failures("nodeDrain") == before + 3  # every failed try counted
    assert [(w, r) for w, r, _ in drill.announced] == [(True, "RevertFailed")]


def _drill(write_status: Any) -> Any:
    drill = drill_run.Drill.__new__(drill_run.Drill)
    drill.announced = []
    drill.ctx = drill_run.DrillContext(
        "ns",
        "http://svc",
        "/health",
        api=None,  # type: ignore[arg-type]
        write_status=write_status,
        announce=lambda warning, reason, message: drill.announced.append((warning, reason, message)),
    )
    return drill


async def test_a_transient_revert_failure_is_retried_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server refuses twice (an outage), then answers: the fault ends Reverted."""
    tries: list[str] = []

    async def flaky(kind: str, undo: Any, api: Any) -> str:
        tries.append(kind)
        if len(tries) < 3:
            raise RuntimeError("connection refused")
        return "scaled back"

    async def write_status(fields: dict[str, Any]) -> None:
        pass

    monkeypatch.setattr(drill_run, "revert_fault", flaky)
    monkeypatch.setattr(drill_run, "REVERT_BACKOFF_S", (0.0, 0.01, 0.01))
    drill = _drill(write_status)
    drill.state = drill_run._State(stages=[], journal=_journal("scaleDown"))
    await drill._revert("f1")
    assert drill.state.journal[0]["phase"] == "Reverted" and len(tries) == 3
    assert [(w, r) for w, r, _ in drill.announced] == [(False, "FaultReverted")]


async def test_a_failed_revert_stays_open_and_a_replay_reverts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RevertFailed is not an end: the next replay (restart, retry timer, deletion) tries again,
    counts the rounds that failed, and a replay that works ends it Reverted."""
    answers = iter([RuntimeError("gone"), RuntimeError("gone"), "scaled back"])

    async def revert(kind: str, undo: Any, api: Any) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(drill_run, "revert_fault", revert)
    journal = await drill_run.replay_journal(_journal("scaleDown"), api=None)  # type: ignore[arg-type]
    assert journal[0]["phase"] == "RevertFailed" and jr.open_entries(journal)
    journal = await drill_run.replay_journal(journal, api=None)  # type: ignore[arg-type]
    assert (journal[0]["phase"], journal[0]["revertTries"]) == ("RevertFailed", 2)
    journal = await drill_run.replay_journal(journal, api=None)  # type: ignore[arg-type]
    assert journal[0]["phase"] == "Reverted" and not jr.open_entries(journal)


def test_counters_the_alerts_watch_exist_at_zero() -> None:
    for verdict in metrics.VERDICT_VALUES:
        assert (
            REGISTRY.get_sample_value(
                "mcp_operator_verdicts_total", {"kind": "MCPBenchmark", "verdict": verdict}
            )
            is not None
        )
    assert (
        REGISTRY.get_sample_value("mcp_operator_errors_total", {"handler": "evaluate_readiness"}) is not None
    )


async def test_a_deleted_gate_takes_its_ready_series_with_it() -> None:
    metrics.READY.labels("team-a", "gone").set(0)
    labels = {"namespace": "team-a", "name": "gone"}
    assert REGISTRY.get_sample_value("mcp_operator_readiness_ready", labels) == 0
    await forget_deleted_gate(type="MODIFIED", meta={"namespace": "team-a", "name": "gone"})  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("mcp_operator_readiness_ready", labels) == 0
    await forget_deleted_gate(type="DELETED", meta={"namespace": "team-a", "name": "gone"})  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("mcp_operator_readiness_ready", labels) is None
    await forget_deleted_gate(type="DELETED", meta={"namespace": "team-a", "name": "never-seen"})  # type: ignore[arg-type]
