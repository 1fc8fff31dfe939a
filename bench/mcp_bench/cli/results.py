"""The commands that read result documents: ``merge`` shard results exactly, ``show`` a result's
table, ``plot`` it as a PNG, ``report`` it as one HTML page (and JUnit XML). Every document read is
checksum-verified first."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from mcp_bench.cli.common import EXIT_OK, EXIT_USAGE, exit_code, load_document, write_outputs
from mcp_bench.report import csv_text, print_report
from mcp_bench.results import dumps_document, merge_documents
from mcp_bench.results.merge import MIN_OVERLAP
from mcp_bench.search.cli import print_search


def cmd_merge(args: argparse.Namespace, out: Console, err: Console) -> int:
    docs = [load_document(p) for p in args.files]
    merged = merge_documents(docs, min_overlap=args.min_overlap)
    write_outputs(merged, args.output, args.csv)
    if not args.output:
        out.print(dumps_document(merged), highlight=False, soft_wrap=True)
    elif not args.quiet:
        print_report(merged, out)
    return exit_code(merged) if args.check else EXIT_OK


def cmd_show(args: argparse.Namespace, out: Console, err: Console) -> int:
    doc = load_document(args.file)
    if args.csv:
        Path(args.csv).write_text(csv_text(doc), encoding="utf-8")
    print_report(doc, out)
    if doc.search is not None:
        print_search(doc.search, out)
    return exit_code(doc) if args.check else EXIT_OK


def cmd_plot(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        from mcp_bench.plot import plot_result  # matplotlib only when a chart is asked for
    except ModuleNotFoundError as missing:
        if missing.name != "matplotlib" and not (missing.name or "").startswith("matplotlib."):
            raise
        err.print("mcp-bench plot needs matplotlib: pip install 'mcp-operator[plot]'", markup=False)
        return EXIT_USAGE
    path = plot_result(load_document(args.file), Path(args.output))
    out.print(f"wrote {path}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    """One self-contained HTML report of a verified result, and JUnit XML of its SLO checks."""
    from mcp_bench.reportfiles import MissingExtraError, write_report

    doc = load_document(args.file)
    html = Path(args.output) if args.output else Path(args.file).with_suffix(".html")
    try:
        written = write_report(doc, html, None if args.junit is None else Path(args.junit))
    except MissingExtraError as exc:
        for path in exc.written:  # the JUnit XML needs no plotting library
            out.print(f"wrote {path}", highlight=False)
        err.print(f"mcp-bench report: {exc}", markup=False)
        return EXIT_USAGE
    for path in written:
        out.print(f"wrote {path}", highlight=False)
    return exit_code(doc) if args.check else EXIT_OK


def add_result_commands(sub: Any) -> None:
    """``merge``, ``show``, ``plot`` and ``report``, registered on the CLI's subcommands."""
    merge = sub.add_parser("merge", help="merge shard results exactly (checksums verified)")
    merge.add_argument("files", nargs="+")
    merge.add_argument("--output", "-o", help="write the merged document (default: stdout)")
    merge.add_argument(
        "--min-overlap",
        type=float,
        default=MIN_OVERLAP,
        help="share of a level's time every shard must have run in for it to be a cluster-wide "
        "figure (default 0.9); a level below is flagged",
    )
    merge.add_argument("--csv")
    merge.add_argument("--quiet", "-q", action="store_true")
    merge.add_argument("--check", action="store_true", help="exit 1 when the merged SLO verdict fails")
    merge.set_defaults(func=cmd_merge)

    show = sub.add_parser("show", help="verify a result's checksum and print its table")
    show.add_argument("file")
    show.add_argument("--csv")
    show.add_argument("--check", action="store_true", help="exit 1 when the SLO verdict fails")
    show.set_defaults(func=cmd_show)

    plot = sub.add_parser("plot", help="verify a result's checksum and chart it as a PNG")
    plot.add_argument("file")
    plot.add_argument("--output", "-o", required=True, help="PNG to write")
    plot.set_defaults(func=cmd_plot)

    report = sub.add_parser(
        "report", help="verify a result's checksum and write one self-contained HTML report (and JUnit XML)"
    )
    report.add_argument("file")
    report.add_argument("--output", "-o", help="HTML to write (default: the result's name with .html)")
    report.add_argument("--junit", help="also write the SLO judgements as JUnit XML, for CI")
    report.add_argument("--check", action="store_true", help="exit 1 when the SLO verdict fails")
    report.set_defaults(func=cmd_report)
