"""A board table that fits the terminal without breaking a word: rich shrinks a wrapping column
below its longest word and then splits words mid-way ("Inconclusiv/e" at 80 columns).

Here each column is at least as wide as its longest word (a verdict or a state: its whole cell),
the room left is shared out by how much each column would still take, and text wraps at spaces
only. Where even that does not fit, the columns marked droppable are left out, least needed first
(a line says which); only past that do the widest columns of figures or free text fold their
longest words (a ``key=value`` figure), never a verdict, a name or a reason. The
widths are chosen when rich renders, so one board fits an 80- and a 160-column terminal alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

GAP = 2  # between two columns: the cell's right padding and the (blank) divider
FOLD_FLOOR = 6  # the narrowest a text column folds to, as a last resort


@dataclass(frozen=True)
class Column:
    header: str
    whole: bool = False  # a verdict or a state: never wrapped
    fold: bool = False  # figures or free text: its longest words may fold, as a last resort
    drop: int = 0  # 0: always shown; else left out on a narrow terminal, 1 first


def _words(text: str) -> list[str]:
    return text.split() or [""]


def _lines(text: str) -> list[str]:
    return text.splitlines() or [""]


@dataclass(frozen=True)
class _Measure:
    natural: int  # the widest line: the width that wraps nothing
    minimum: int  # the longest word (a whole column: the widest line)


def _measure(column: Column, cells: Sequence[Text]) -> _Measure:
    texts = [column.header, *(cell.plain for cell in cells)]
    natural = max(cell_len(line) for text in texts for line in _lines(text))
    longest = max(cell_len(word) for text in texts for word in _words(text))
    return _Measure(natural, natural if column.whole else longest)


def share(measures: Sequence[_Measure], room: int) -> list[int] | None:
    """Column widths within ``room`` (the gaps taken off), each at least its minimum; None where
    the minimums do not fit. The spare room first unwraps the columns that need least of it (as
    few wrapped columns as can be), the rest goes to the others by how much each would take."""
    widths = [m.minimum for m in measures]
    spare = room - sum(widths)
    if spare < 0:
        return None
    wants = {i: m.natural - m.minimum for i, m in enumerate(measures) if m.natural > m.minimum}
    for index in sorted(wants, key=wants.__getitem__):
        if wants[index] > spare:
            break
        want = wants.pop(index)
        widths[index] += want
        spare -= want
    total = sum(wants.values())
    for index, want in wants.items():
        widths[index] += spare * want // total
    left = room - sum(widths)
    for index in sorted(wants, key=wants.__getitem__, reverse=True)[:left]:
        widths[index] += 1
    return widths


def folded(measures: Sequence[_Measure], columns: Sequence[Column], room: int) -> list[int]:
    """The last resort: the widest foldable columns narrowed below their longest word (which
    then folds), never below ``FOLD_FLOOR``; a verdict, a name or a reason is never narrowed."""
    floors = [
        min(m.minimum, FOLD_FLOOR) if c.fold else m.minimum for m, c in zip(measures, columns, strict=True)
    ]
    widths = [m.minimum for m in measures]
    while sum(widths) > room:
        narrowable = [i for i, w in enumerate(widths) if w > floors[i]]
        if not narrowable:
            break
        widths[max(narrowable, key=lambda i: widths[i])] -= 1
    return widths


class FittedTable:
    """A titled table of text cells that fits the width rich renders it at."""

    def __init__(self, title: str, columns: Sequence[Column], rows: Iterable[Sequence[Text | str]]) -> None:
        self.title = title
        self.columns = list(columns)
        self.rows = [[cell if isinstance(cell, Text) else Text(cell) for cell in row] for row in rows]

    def _layout(self, width: int) -> tuple[list[int], list[int]]:
        """The columns shown (by index) and their widths at ``width``."""
        shown = list(range(len(self.columns)))
        droppable = sorted((c.drop, i) for i, c in enumerate(self.columns) if c.drop)
        while True:
            measures = [_measure(self.columns[i], [row[i] for row in self.rows]) for i in shown]
            room = width - GAP * (len(shown) - 1)
            widths = share(measures, room)
            if widths is not None:
                return shown, widths
            if not droppable:
                return shown, folded(measures, [self.columns[i] for i in shown], room)
            shown.remove(droppable.pop(0)[1])

    def table(self, width: int) -> Table:
        shown, widths = self._layout(width)
        table = Table(
            title=self.title,
            title_justify="left",
            title_style="bold",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            padding=(0, 1, 0, 0),
            pad_edge=False,
        )
        for index, column_width in zip(shown, widths, strict=True):
            column = self.columns[index]
            table.add_column(column.header, width=column_width, no_wrap=column.whole, overflow="fold")
        for row in self.rows:
            table.add_row(*(row[i] for i in shown))
        left_out = [self.columns[i].header for i in range(len(self.columns)) if i not in shown]
        if left_out:
            table.caption = (
                f"left out at {width} columns: {', '.join(left_out)} (a wider terminal shows them)"
            )
            table.caption_justify = "left"
            table.caption_style = "dim"
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)
