"""The commands that judge a result: ``diagnose`` looks for the latency traps (in a result, a
profiler trace, Nsight Compute reports, a second run), ``forensics`` follows GPU memory per level.
Their libraries are imported when the command runs, so ``run`` never loads them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from mcp_bench.cli.common import EXIT_NOTHING, EXIT_OK, EXIT_SLO, UsageError, load_document


def cmd_diagnose(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The trap detectors over a result (and a trace, Nsight Compute reports, a second run)."""
    from mcp_bench.diagnose import (
        FOUND,
        DiagnoseInputs,
        NcuFormatError,
        ThresholdError,
        TraceFormatError,
        diagnose,
        load_ncu,
        load_trace,
    )
    from mcp_bench.diagnose.render import findings_json, print_findings

    if args.file is None and args.trace is None and args.ncu is None:
        raise UsageError("give a result document, --trace or --ncu (or several)")
    try:
        inputs = DiagnoseInputs(
            document=None if args.file is None else load_document(args.file),
            compare=None if args.compare is None else load_document(args.compare),
            trace=None if args.trace is None else load_trace(args.trace),
            ncu=None if args.ncu is None else load_ncu(args.ncu),
            ncu_baseline=None if args.ncu_baseline is None else load_ncu(args.ncu_baseline),
        )
        findings = diagnose(inputs, args.threshold or ())
    except (OSError, TraceFormatError, NcuFormatError, ThresholdError) as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        out.print(findings_json(findings), highlight=False, soft_wrap=True, markup=False)
    else:
        print_findings(findings, out)
    return EXIT_SLO if any(f.state == FOUND for f in findings) else EXIT_OK


def cmd_forensics(args: argparse.Namespace, out: Console, err: Console) -> int:
    """GPU-memory forensics over a result (and a PyTorch allocator snapshot)."""
    import json

    from mcp_bench.forensics.memory import MIB, Tolerance, allocator_fragmentation
    from mcp_bench.forensics.render import forensics_json, print_forensics
    from mcp_bench.forensics.sources import memory_forensics

    tol = Tolerance(absolute_bytes=args.tolerance_mib * MIB)
    report = memory_forensics(load_document(args.file), tol)
    allocator = None
    if args.snapshot is not None:
        try:
            allocator = allocator_fragmentation(
                json.loads(Path(args.snapshot).read_text(encoding="utf-8")), tol
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UsageError(f"{args.snapshot}: not a memory snapshot as JSON: {exc}") from exc
    if args.json:
        out.print(forensics_json(report, allocator), highlight=False, soft_wrap=True, markup=False)
    else:
        print_forensics(report, allocator, out)
    states = [v["state"] for v in report.values()] + ([allocator["state"]] if allocator else [])
    if "Found" in states:
        return EXIT_SLO
    return EXIT_OK if any(s == "NotFound" for s in states) else EXIT_NOTHING


def add_finding_commands(sub: Any) -> None:
    """``diagnose`` and ``forensics``, registered on the CLI's subcommands."""
    diag = sub.add_parser(
        "diagnose", help="look for the twelve hidden latency traps (exit 1 when one is found)"
    )
    diag.add_argument("file", nargs="?", help="result document (checksum verified)")
    diag.add_argument("--trace", help="profiler trace, Chrome trace JSON (PyTorch profiler, Nsight Systems)")
    diag.add_argument("--ncu", help="Nsight Compute CSV export (ncu --csv --page raw or details)")
    diag.add_argument("--ncu-baseline", help="Nsight Compute CSV of a baseline to compare against")
    diag.add_argument("--compare", help="a second result of the same workload (other protocol or precision)")
    diag.add_argument(
        "--threshold", action="append", metavar="TRAP.NAME=VALUE", help="e.g. 3.queue_share=0.5"
    )
    diag.add_argument("--json", action="store_true", help="print the findings as JSON")
    diag.set_defaults(func=cmd_diagnose)

    fx = sub.add_parser(
        "forensics",
        help="GPU memory per level: peak, return to baseline, growth over repeats (exit 1 when found)",
    )
    fx.add_argument("file", help="result document (checksum verified)")
    fx.add_argument("--snapshot", help="PyTorch allocator snapshot as JSON (torch.cuda.memory_snapshot())")
    fx.add_argument(
        "--tolerance-mib", type=float, default=64.0, help="memory that may stay behind (default 64 MiB)"
    )
    fx.add_argument("--json", action="store_true", help="print the forensics as JSON")
    fx.set_defaults(func=cmd_forensics)
