"""The verdict marks the board, the demo's table and the KPI rows show, and the one mapping from
the emoji marks a status may still hold.

Emoji need an emoji font a terminal or a browser may lack (a default Debian desktop has none:
they show as empty boxes), and a terminal draws them two columns wide, so a board's columns no
longer line up. These marks are single-width glyphs of DejaVu Sans Mono (✓, ✗) or ASCII (!, ?).
The HTML report spells a mark as its verdict word instead (its colour is drawn by CSS).
"""

from __future__ import annotations

import re

MARKS: dict[str, str] = {"Pass": "✓", "Warn": "!", "Fail": "✗", "Inconclusive": "?", "Error": "?"}
NO_MARK = "?"
# the emoji marks of a status written before (its KPI rows' ``mark``), as the verdict each stands for
EMOJI_VERDICTS = {"✅": "Pass", "⚠️": "Warn", "⚠": "Warn", "❌": "Fail"}
# symbols and dingbats (less the marks above, which DejaVu has), the emoji presentation selector, emoji
EMOJI = re.compile("(?![✓✗])[\u2600-\u27bf]|[\ufe0f\U0001f000-\U0001faff]")


def mark(verdict: object) -> str:
    """The mark of a verdict (``Pass`` or ``Verdict.PASS``), ``?`` where there is none."""
    return MARKS.get(str(verdict), NO_MARK)


def fontless(text: str) -> str:
    """``text`` with its emoji verdict marks spelt as their verdict words and any other emoji
    dropped: for a page that must read without an emoji font."""
    for emoji, verdict in EMOJI_VERDICTS.items():
        text = text.replace(emoji, verdict)
    return EMOJI.sub("", text)
