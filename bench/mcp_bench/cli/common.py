"""What the ``mcp-bench`` subcommands share: usage errors, exit codes and result files.

Exit codes (for CI): 0 every SLO passed (or none was set), 1 an SLO was missed, 2 bad usage, plan
or input file, 3 the run measured nothing (no request completed). ``diagnose``: 0 no trap found,
1 at least one found, 2 bad usage or input. ``forensics``: 0 nothing found, 1 a finding, 3 no
memory readings to judge.
"""

from __future__ import annotations

from pathlib import Path

from mcp_bench.report import csv_text
from mcp_bench.results import (
    ChecksumMismatchError,
    DocumentFormatError,
    ResultDocument,
    dumps_document,
    loads_document,
)

EXIT_OK, EXIT_SLO, EXIT_USAGE, EXIT_NOTHING = 0, 1, 2, 3


class UsageError(ValueError):
    pass


def exit_code(doc: ResultDocument) -> int:
    if not doc.measured_anything:
        return EXIT_NOTHING
    return EXIT_SLO if doc.slo_passed is False else EXIT_OK


def load_document(path: str) -> ResultDocument:
    """A result document from a file, its checksum verified; a usage error when it is not one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from exc
    try:
        return loads_document(text)
    except (ChecksumMismatchError, DocumentFormatError) as exc:
        raise UsageError(f"{path}: {exc}") from exc


def write_outputs(doc: ResultDocument, output: str | None, csv_path: str | None) -> None:
    """The document (``--output``) and its CSV rows (``--csv``), where asked for."""
    if output:
        Path(output).write_text(dumps_document(doc) + "\n", encoding="utf-8")
    if csv_path:
        Path(csv_path).write_text(csv_text(doc), encoding="utf-8")
