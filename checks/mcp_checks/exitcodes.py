"""The exit codes of ``mcp-check`` (its checks) and ``mcp-check gate``: one table, one meaning
per code, whichever command a CI step runs.

Standard library only: the CLI imports it before it knows which command runs.
"""

from __future__ import annotations

import textwrap
from enum import IntEnum


class ExitCode(IntEnum):
    PASS = 0
    FAIL = 1
    USAGE = 2
    NOT_VERIFIED = 3
    TIMEOUT = 4


MEANINGS: dict[ExitCode, str] = {
    ExitCode.PASS: "Pass or Warn",
    ExitCode.FAIL: "Fail (the gate: as soon as the verdict is written, no timeout is waited out)",
    ExitCode.USAGE: "usage error: a bad or missing flag, an unreadable manifest or kubeconfig, a manifest "
    "field the API would refuse (named by its path); the gate: a namespace or kind that does not exist; "
    "nothing ran",
    ExitCode.NOT_VERIFIED: "Inconclusive or Error: nothing was verified (an unreachable source, a check "
    "that timed out, xds --wait ending before convergence; the gate: a rejected spec, a suspended "
    "gate, an API refusal such as 403, another release's verdict that nothing will evaluate again)",
    ExitCode.TIMEOUT: "gate only: no evaluation of this release finished within --timeout",
}


def for_verdict(verdict: str) -> ExitCode:
    """A verdict's code: Pass and Warn 0, Fail 1, anything else (Inconclusive, Error, unknown) 3."""
    if verdict in ("Pass", "Warn"):
        return ExitCode.PASS
    if verdict == "Fail":
        return ExitCode.FAIL
    return ExitCode.NOT_VERIFIED


def table() -> str:
    """The table as ``--help`` shows it (an epilog)."""
    rows = (
        textwrap.fill(MEANINGS[code], width=94, initial_indent=f"  {int(code)}  ", subsequent_indent=" " * 5)
        for code in ExitCode
    )
    return "exit codes (mcp-check and mcp-check gate alike):\n" + "\n".join(rows)
