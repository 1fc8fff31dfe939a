"""The verdict marks the board shows need no emoji font and take one terminal column: they come
from the verdict (``board.marks``), so a status an older operator wrote with emoji marks shows the
same board, and the HTML report spells every mark, old or new, as its verdict word."""

from __future__ import annotations

import unicodedata

import pytest
from rich.cells import cell_len
from tests.operator.drillstatus import drill_object

from mcp_checks.verdict import Verdict
from mcp_operator.board.marks import EMOJI, MARKS, fontless, mark
from mcp_operator.board.render import board_text, kpi_rows
from mcp_operator.board.status import readiness


@pytest.mark.parametrize("verdict", list(Verdict))
def test_every_verdict_has_a_single_width_mark_that_is_no_emoji(verdict: Verdict) -> None:
    shown = mark(verdict)
    assert shown == MARKS[verdict.value] and cell_len(shown) == 1
    assert not EMOJI.search(shown)
    assert unicodedata.east_asian_width(shown) in ("Na", "N")  # never drawn two columns wide


def test_a_status_with_emoji_marks_shows_the_marks_of_its_verdicts() -> None:
    obj = drill_object(failing=True)
    emoji = {"Pass": "✅", "Warn": "⚠️", "Fail": "❌"}
    for kpi in obj["status"]["kpis"]:
        kpi["mark"] = emoji.get(kpi["verdict"], "?")  # as an operator before the change wrote it
    text = board_text(obj, width=160)
    assert not EMOJI.search(text)
    rows = kpi_rows(readiness(obj).status.kpis)
    assert {"✓ Pass", "! Warn", "✗ Fail"} <= {str(row[4]) for row in rows}


def test_the_report_spells_old_emoji_marks_as_words_and_keeps_the_new_marks() -> None:
    assert fontless("✅ a; ⚠️ b; ⚠ c; ❌ d 🚀") == "Pass a; Warn b; Warn c; Fail d "
    assert fontless("✓ kept, ✗ kept") == "✓ kept, ✗ kept"
