"""Nsight Compute reports exported as CSV (``ncu --csv --page raw`` or ``--page details``).

The raw page has one row per profiled kernel launch and one column per metric (a row of units
may follow the header); the details page has one row per metric (``Section Name``, ``Metric
Name``, ``Metric Unit``, ``Metric Value``). Both become :class:`NcuKernel` records, metrics keyed
by the names ncu prints: raw metric names (``lts__t_sector_hit_rate.pct``) on the raw page and for
metrics asked with ``--metrics``; section labels such as ``L2 Hit Rate`` on the details page, which
:data:`ALIASES` maps to the raw names. Values with thousands separators (``1,234``) are read as
numbers; ``n/a`` and empty cells are left out. Lines ncu prints before the table (``==PROF==``)
are skipped.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

ID_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Kernel Time",
    "Section Name",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
    "Rule Name",
    "Rule Type",
    "Rule Description",
    "Estimated Speedup Type",
    "Estimated Speedup",
)

# details-page labels -> the raw metric they show
ALIASES = {
    "L2 Hit Rate": "lts__t_sector_hit_rate.pct",
    "L1/TEX Hit Rate": "l1tex__t_sector_hit_rate.pct",
    "Shared Memory Bank Conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
}


class NcuFormatError(ValueError):
    """Not an Nsight Compute CSV export."""


@dataclass
class NcuKernel:
    id: str
    name: str
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    def get(self, *names: str) -> float | None:
        for n in names:
            if n in self.metrics:
                return self.metrics[n]
        return None


@dataclass
class NcuReport:
    source: str
    kernels: list[NcuKernel] = field(default_factory=list)


def number(text: str) -> float | None:
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def parse_ncu_csv(text: str, source: str = "ncu") -> NcuReport:
    lines = text.splitlines()
    start = next(
        (i for i, line in enumerate(lines) if line.startswith('"ID"') or line.startswith("ID,")), None
    )
    if start is None:
        raise NcuFormatError(f'{source}: no CSV header starting with "ID" (export with ncu --csv)')
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    if "Kernel Name" not in header:
        raise NcuFormatError(f"{source}: the header has no 'Kernel Name' column")
    col = {name: i for i, name in enumerate(header)}
    report = NcuReport(source)
    kernels: dict[str, NcuKernel] = {}
    if "Metric Name" in col and "Metric Value" in col:
        for row in rows[1:]:
            if len(row) < len(header):
                continue
            kid = row[col["ID"]]
            kernel = kernels.get(kid)
            if kernel is None:
                kernel = kernels[kid] = NcuKernel(kid, row[col["Kernel Name"]])
                report.kernels.append(kernel)
            name = row[col["Metric Name"]]
            value = number(row[col["Metric Value"]])
            if value is None:
                continue
            key = ALIASES.get(name, name)
            kernel.metrics[key] = value
            if "Metric Unit" in col:
                kernel.units[key] = row[col["Metric Unit"]]
        return report
    metric_cols = [(i, name) for i, name in enumerate(header) if name not in ID_COLUMNS]
    units: dict[str, str] = {}
    for row in rows[1:]:
        if len(row) < len(header):
            continue
        if not row[col["ID"]].strip():  # the units row under the header
            units = {name: row[i] for i, name in metric_cols}
            continue
        kernel = NcuKernel(row[col["ID"]], row[col["Kernel Name"]])
        for i, name in metric_cols:
            value = number(row[i])
            if value is not None:
                key = ALIASES.get(name, name)
                kernel.metrics[key] = value
                if name in units:
                    kernel.units[key] = units[name]
        report.kernels.append(kernel)
    return report


def load_ncu(path: str | Path) -> NcuReport:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise NcuFormatError(f"{p}: cannot read: {exc}") from exc
    return parse_ncu_csv(text, str(p))
