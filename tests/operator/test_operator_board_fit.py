"""The board at 80 and 160 columns, as a terminal shows it: no word is split across lines (the
issue: "Inconclusiv/e" at 80 columns), no line is wider than the terminal, and the columns left
out at a narrow width are named."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text
from tests.operator.drillstatus import benchmark_object, drill_object

from mcp_operator.board.fit import Column, FittedTable
from mcp_operator.board.render import (
    CHECK_HEADERS,
    FAULT_DROP,
    FAULT_HEADERS,
    board,
    check_rows,
    fault_rows,
    kpi_rows,
    stage_rows,
)
from mcp_operator.board.status import readiness

WIDTHS = (80, 160)
VERDICTS = ("Pass", "Warn", "Fail", "Error", "Inconclusive", "Reverted", "RevertFailed", "Done")


def _render(renderable: Any, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


def _inconclusive_drill() -> dict[str, Any]:
    """A failing drill with an Inconclusive KPI and check (the longest verdict word, beside the
    longest reason a drill writes) and a KPI in Error."""
    obj = drill_object(failing=True)
    status = obj["status"]
    status["kpis"][0].update(verdict="Inconclusive", mark="?")
    status["kpis"][-1].update(verdict="Error", mark="?")
    status["checks"].append(
        {
            "name": "load-generator",
            "verdict": "Inconclusive",
            "reason": "LoadGeneratorSaturated",
            "observed": {"scheduleLagP99": "16.5 ms", "rate": "179 req/s"},
            "thresholds": {"maxScheduleLagP99Ms": "10"},
        }
    )
    return obj


def _words(rows: list[list[Text | str]], skip: set[int] = frozenset()) -> set[str]:  # type: ignore[assignment]
    return {word for row in rows for i, cell in enumerate(row) if i not in skip for word in str(cell).split()}


@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_of_a_drills_board_is_split(width: int) -> None:
    obj = _inconclusive_drill()
    status = readiness(obj).status
    text = _render(board(obj), width)
    lines = text.splitlines()
    assert max(cell_len(line.rstrip()) for line in lines) <= width
    shown = set(text.split())
    for verdict in VERDICTS:
        assert verdict in shown, f"{verdict} split or missing at {width} columns"
    assert "LoadGeneratorSaturated" in shown and "healthSuccessRatio" in shown
    dropped = {FAULT_HEADERS.index(h) for h in FAULT_DROP} if width == 80 else set()
    # at 80 columns the checks' figures fold (scheduleLagP99=16.5 ms beside maxScheduleLagP99Ms=10,
    # Inconclusive and LoadGeneratorSaturated leave no room): their names and reasons stay whole
    figures = {CHECK_HEADERS.index("Value"), CHECK_HEADERS.index("Bound")} if width == 80 else set()
    words = (
        _words(kpi_rows(status.kpis))
        | _words(check_rows(status.checks), figures)
        | _words(stage_rows(status.stages))
        | _words(fault_rows(status.faults, status.kpis), dropped)
    )
    assert words - shown == set()  # every word of every row shown whole


def test_at_80_columns_the_faults_leave_out_what_their_other_cells_say() -> None:
    text = _render(board(_inconclusive_drill()), 80)
    assert "left out at 80 columns: Stage, Held" in " ".join(text.split())
    assert "left out" not in _render(board(_inconclusive_drill()), 160)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_benchmarks_board_fits_too(width: int) -> None:
    text = _render(board(benchmark_object()), width)
    assert max(cell_len(line.rstrip()) for line in text.splitlines()) <= width
    assert "Levels" in text and "left out" not in text


def test_a_word_longer_than_any_room_folds_as_a_last_resort() -> None:
    """Two columns, 30 characters: the verdict stays whole, the long token folds."""
    columns = [Column("Target", fold=True), Column("Verdict", whole=True)]
    table = FittedTable("t", columns, [["x" * 40, "Inconclusive"]])
    text = _render(table, 30)
    assert "Inconclusive" in text.split()
    assert max(cell_len(line.rstrip()) for line in text.splitlines()) <= 30
    assert "".join(line.split()[0] for line in text.splitlines()[3:] if line.strip()).startswith("x" * 16)


def test_a_markup_like_cell_is_shown_as_written() -> None:
    """Cells are text, never rich markup: a reason such as ``[bold]`` is printed as is."""
    assert "[bold]x" in _render(FittedTable("t", [Column("Reason")], [["[bold]x"]]), 80)
