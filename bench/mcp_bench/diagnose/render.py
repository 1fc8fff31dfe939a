"""Findings for people (a table) and for tools (JSON)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from mcp_bench.diagnose.finding import FOUND, NO_DATA, Finding

MARK = {"Found": "[bold red]Found[/]", "NotFound": "[green]NotFound[/]", "NoData": "[dim]NoData[/]"}


def findings_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.model_dump(mode="json") for f in findings], indent=2, sort_keys=False)


def print_findings(findings: Sequence[Finding], out: Console) -> None:
    table = Table(title="mcp-bench diagnose: hidden latency traps", show_lines=False)
    for col in ("trap", "name", "state", "level", "evidence", "source"):
        table.add_column(col, overflow="fold")
    for f in findings:
        evidence = f.summary
        if f.state == NO_DATA and f.needs:
            evidence += f" (needs: {f.needs})"
        table.add_row(
            "+" if f.trap == 0 else str(f.trap), f.name, MARK[f.state], f.level or "", evidence, f.source
        )
    out.print(table)
    for f in findings:
        if f.state == FOUND:
            out.print(f"[bold]{f.label}[/] {f.name}: {f.advice}", highlight=False)
