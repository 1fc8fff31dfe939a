"""The exit codes of every command under ``mcp-check`` and ``kubectl mcp`` (the checks, ``gate``
and ``board``): one table, one meaning per code, whichever command a CI step runs.

``MEANINGS`` is the table docs/mcp-check.md shows (its "Exit codes" section; a test compares the
two) and, without the Markdown, what every ``--help`` prints. Standard library only: the CLI
imports it before it knows which command runs.
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
    ExitCode.PASS: "`Pass` or `Warn`; `board`: the object is Ready for its current spec",
    ExitCode.FAIL: "`Fail`: verified, and not good enough (`gate`: as soon as the verdict is written, "
    "no timeout is waited out; `board`: the verdict of the current spec is `Fail`)",
    ExitCode.USAGE: "usage error, nothing ran: a bad or missing flag (the message names it), an "
    "unreadable manifest or kubeconfig, a manifest field the API would refuse (named by its path); "
    "or what cannot appear: the namespace or the kind (the CRD) of a `gate` or a `board` does not "
    "exist, or the object a `board` names",
    ExitCode.NOT_VERIFIED: "`Inconclusive` or `Error`, nothing was verified: an unreachable target "
    "or API server, an API refusal such as 403, a rejected spec, a suspended gate, `xds --wait` "
    "ending before convergence (`ConvergenceTimeout`), `gate --release` of another release that "
    "nothing will evaluate again (`ReleaseNotEvaluated`); `board`: an evaluation or a run still in "
    "progress, or a verdict of an older generation",
    ExitCode.TIMEOUT: "timeout, `gate` only: no evaluation of this release finished within "
    "`--timeout` (an API server unreachable all that time included: the gate waits through an "
    "outage)",
}
TITLE = "exit codes (every mcp-check and kubectl mcp command alike):"


def for_verdict(verdict: str) -> ExitCode:
    """A verdict's code: Pass and Warn 0, Fail 1, anything else (Inconclusive, Error, unknown) 3."""
    if verdict in ("Pass", "Warn"):
        return ExitCode.PASS
    if verdict == "Fail":
        return ExitCode.FAIL
    return ExitCode.NOT_VERIFIED


def markdown_rows() -> list[str]:
    """The table's rows as docs/mcp-check.md writes them."""
    return [f"| {int(code)} | `{code.name}` | {MEANINGS[code]} |" for code in ExitCode]


def table() -> str:
    """The table as ``--help`` shows it (an epilog): the Markdown's words without its marks."""
    indent = " " * 5
    rows = (
        textwrap.fill(
            MEANINGS[code].replace("`", ""), 94, initial_indent=f"  {int(code)}  ", subsequent_indent=indent
        )
        for code in ExitCode
    )
    return TITLE + "\n" + "\n".join(rows)
