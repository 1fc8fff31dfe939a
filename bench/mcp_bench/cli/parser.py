"""``mcp-bench``: run a benchmark, merge shard results, show, chart, report or diagnose a result.

The subcommands come from the modules of their concern; ``main`` parses, runs one and turns the
errors of a bad plan, flag or input into exit code 2 (:mod:`mcp_bench.cli.common` lists them all).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.console import Console

from mcp_bench.cli.common import EXIT_USAGE, UsageError
from mcp_bench.cli.findings import add_finding_commands
from mcp_bench.cli.results import add_result_commands
from mcp_bench.cli.run import add_run_commands
from mcp_bench.cli_observers import ObserverArgError
from mcp_bench.engines import UnknownBackendError, UnknownEngineError
from mcp_bench.engines.external import ExternalEngineError
from mcp_bench.plan import PlanError
from mcp_bench.results import MergeError
from mcp_bench.telemetry.serve import add_sampler_command


def build_parser() -> argparse.ArgumentParser:
    # the docstring's first line; none under -OO, which the operator's image runs with
    parser = argparse.ArgumentParser(prog="mcp-bench", description=(__doc__ or "").partition("\n")[0] or None)
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_commands(sub)
    add_result_commands(sub)
    add_finding_commands(sub)
    add_sampler_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Console()
    if not out.is_terminal:
        out = Console(width=200)  # pods and pipes: never wrap the table
    err = Console(stderr=True, soft_wrap=True)  # an error line is never broken mid-message
    try:
        code: int = args.func(args, out, err)
    except (
        UsageError,
        PlanError,
        MergeError,
        UnknownBackendError,
        UnknownEngineError,
        ObserverArgError,
        ExternalEngineError,
    ) as exc:
        err.print(f"mcp-bench: error: {exc}", highlight=False, markup=False)
        return EXIT_USAGE
    return code
