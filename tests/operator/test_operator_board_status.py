"""The board and the report read a status through its API model, tolerant of what it lacks: an
object an older or newer operator wrote is shown, the rows it can read whole, a figure it does
not hold as ``-`` (not the model's default)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from tests.operator.drillstatus import drill_object

from mcp_common.tolerant import held, tolerant
from mcp_operator.api.drill import StageSummary
from mcp_operator.api.readiness import MCPReadinessStatus
from mcp_operator.board.codes import object_code
from mcp_operator.board.render import board_text
from mcp_operator.board.status import readiness


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def test_a_status_the_model_reads_is_read_as_it_is() -> None:
    obj = drill_object()
    shown = readiness(obj)
    assert (shown.namespace, shown.name, shown.generation) == ("demo", "mcp2026", 1)
    assert shown.status == MCPReadinessStatus.model_validate(obj["status"])


def test_what_the_model_cannot_read_is_left_out_and_the_rest_is_shown() -> None:
    obj = drill_object()
    status = obj["status"]
    status["addedLater"] = {"by": "a newer operator"}  # a field this model does not know
    status["score"] = "high"  # a value of the wrong type: its default instead
    status["stages"][0]["addedLater"] = 1
    del status["faults"][0]["plannedAt"]  # a text it lacks: empty
    del status["faults"][1]["phase"]  # a verdict-like field with no empty form: the row goes
    del status["conditions"][0]["lastTransitionTime"]
    read = readiness(obj).status
    assert read.score is None and read.stages[0].name == "baseline"
    assert [f.id for f in read.faults] == ["mixed-0"] and read.faults[0].planned_at == ""
    assert read.conditions[0].last_transition_time == ""
    text = board_text(obj, width=160)
    assert "Verdict Pass · Ready True (ChecksPassed)" in " ".join(text.split())
    assert any(line.startswith("baseline Done 250 req/s") for line in _lines(text))
    assert object_code(obj) == 0


def test_a_figure_the_status_does_not_hold_is_not_its_default() -> None:
    row = tolerant(StageSummary, {"name": "a", "phase": "Running", "requested": "5 req/s"})
    assert row.errors == 0 and held(row, "errors") is None
    assert held(tolerant(StageSummary, {"name": "a", "phase": "Done", "errors": 0}), "errors") == 0


def test_a_row_without_what_names_it_is_not_read() -> None:
    with pytest.raises(ValidationError):
        tolerant(StageSummary, {"name": "a"})  # no phase, which has no empty form


def test_no_status_at_all_is_an_empty_one() -> None:
    for status in (None, [], "x"):
        shown = readiness({"kind": "MCPReadiness", "metadata": {"name": "n"}, "status": status})
        assert shown.status == MCPReadinessStatus() and shown.generation is None
