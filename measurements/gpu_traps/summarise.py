#!/usr/bin/env python3
"""What the trap detectors say about each artefact of ``run_all.sh``: one JSON line per trap
and file (traces: traps 1, 4, 5, 7; Nsight Compute CSVs: 2, 9, against their twin as baseline;
result documents: 10, 12), sub-folders included, so a raw export and its trimmed copy are both
judged (they should agree). Needs ``bench/`` on the path and the benchmark's dependencies.

    PYTHONPATH=bench python3 measurements/gpu_traps/summarise.py DIR [DIR...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp_bench.diagnose import DiagnoseInputs, diagnose, load_ncu, load_trace
from mcp_bench.results.document import loads_document

TWINS = {"attn_interleaved": "attn_head_major", "transpose_naive": "transpose_padded"}


def show(path: Path, traps: tuple[int, ...], inputs: DiagnoseInputs) -> None:
    for f in diagnose(inputs):
        if f.trap in traps:
            row = {"file": path.name, "trap": f.trap, "state": f.state, "summary": f.summary}
            print(json.dumps({**row, "values": f.values}), flush=True)


def main(dirs: list[str]) -> int:
    for d in map(Path, dirs):
        for p in sorted(d.rglob("*")):
            try:
                if p.name.endswith(".trace.json"):
                    show(p, (1, 4, 5, 7), DiagnoseInputs(trace=load_trace(p)))
                elif p.name.endswith(".ncu.csv"):
                    stem = p.name.removesuffix(".ncu.csv")
                    twin = p.with_name(f"{TWINS[stem]}.ncu.csv") if stem in TWINS else None
                    base = load_ncu(twin) if twin is not None and twin.exists() else None
                    show(p, (2, 9), DiagnoseInputs(ncu=load_ncu(p), ncu_baseline=base))
                elif p.name.endswith(".result.json"):
                    show(p, (10, 12), DiagnoseInputs(document=loads_document(p.read_bytes())))
            except (ValueError, OSError) as exc:
                print(json.dumps({"file": p.name, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
