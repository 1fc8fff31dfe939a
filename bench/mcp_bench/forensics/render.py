"""The memory forensics as a table per source (for ``mcp-bench forensics``) or as JSON."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from mcp_bench.forensics.memory import MIB


def _mib(v: Any) -> str:
    return "-" if v is None else f"{float(v) / MIB:,.1f}"


def print_forensics(
    report: dict[str, dict[str, Any]], allocator: dict[str, Any] | None, out: Console
) -> None:
    if not report and allocator is None:
        out.print("no memory readings in this result (GPU telemetry or a server's memory gauges)")
    for source, verdict in report.items():
        table = Table(title=f"memory: {source} ({verdict['state']})", title_justify="left")
        for col in ("level", "before MiB", "peak MiB", "peak %", "after MiB", "kept MiB", "returned"):
            table.add_column(col, justify="left" if col == "level" else "right")
        for row in verdict["levels"]:
            pct = row.get("peak_percent")
            returned = row.get("returned")
            table.add_row(
                row["level"],
                _mib(row.get("before_bytes")),
                _mib(row.get("peak_bytes")),
                "-" if pct is None else f"{pct:.1f}",
                _mib(row.get("after_bytes")),
                _mib(row.get("retained_bytes")),
                "-" if returned is None else ("yes" if returned else "NO"),
            )
        out.print(table)
        for f in verdict["findings"]:
            at = f" at {f['level']}" if f.get("level") else ""
            out.print(f"  {f['kind']}{at}: {f['summary']}", highlight=False, markup=False)
        if not verdict.get("settled"):
            out.print("  no settle wait (observe.settle_s): no level judged for a leak", highlight=False)
    if allocator is not None:
        out.print(
            f"allocator ({allocator['state']}): {_mib(allocator['reserved_bytes'])} MiB reserved, "
            f"{_mib(allocator['allocated_bytes'])} MiB allocated, {allocator['free_blocks']} free blocks, "
            f"free-space entropy {allocator['free_entropy']:.2f}",
            highlight=False,
        )


def forensics_json(report: dict[str, dict[str, Any]], allocator: dict[str, Any] | None) -> str:
    return json.dumps({"memory": report, "allocator": allocator}, indent=2, sort_keys=True)
