#!/usr/bin/env python3
"""Cut an Nsight Compute raw-page CSV (``ncu --csv --page raw``) down to the launch identity
columns and the metrics asked with ``--metrics``: the raw page also prints every device
attribute, which no detector reads. The lines ncu prints before the table, the header, the units
row and the values are otherwise kept as ncu wrote them. Standard library only.

    python3 measurements/gpu_traps/trim_ncu.py big.ncu.csv small.ncu.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

IDENTITY = (
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
)
ATTRIBUTES = ("device__", "c2clink__", "profiler__", "nvlink__", "launch__", "numa__")


def trim(text: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    keep = [
        i
        for i, name in enumerate(rows[0])
        if name in IDENTITY or ("__" in name and not name.startswith(ATTRIBUTES))
    ]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for row in rows:
        writer.writerow([row[i] for i in keep if i < len(row)])
    return "".join(line + "\n" for line in lines[:start]) + out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    args = parser.parse_args(argv)
    args.dst.write_text(trim(args.src.read_text()))
    print(f"{args.src.name}: {args.dst.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
