"""The README's shell blocks as the tests run them: the tests that walk a user's path (the quick
start, the way to your own cluster) read the commands from the README itself, so the page and
what is tested cannot drift apart.

Pure: markdown in, commands out.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")


class ReadmeBlockMissing(LookupError):
    """The README has no shell block under the heading a test walks."""


def shell_block(heading: str, text: str | None = None) -> str:
    """The first ```sh block in the README's section whose ``##`` heading starts with
    ``heading`` (up to the next ``##`` heading)."""
    lines = (README.read_text() if text is None else text).splitlines()
    inside = False
    block: list[str] | None = None
    for line in lines:
        if line.startswith("## "):
            if inside:
                break
            inside = line[3:].strip().startswith(heading)
            continue
        if not inside:
            continue
        fence = _FENCE.match(line)
        if fence and block is None and fence.group(1) in ("sh", "bash", "shell"):
            block = []
        elif fence and block is not None:
            return "\n".join(block) + "\n"
        elif block is not None:
            block.append(line)
    raise ReadmeBlockMissing(f"README.md has no ```sh block under a heading starting {heading!r}")


def commands(block: str) -> list[str]:
    """The block's commands one per entry: comments dropped, backslash continuations joined.
    A ``#`` starts a comment only at the start of a word (a URL's fragment is kept)."""
    out: list[str] = []
    pending = ""
    for raw in block.splitlines():
        line = _strip_comment(raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = (pending + line.strip()).strip()
        pending = ""
        if line:
            out.append(line)
    if pending.strip():
        out.append(pending.strip())
    return out


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line
