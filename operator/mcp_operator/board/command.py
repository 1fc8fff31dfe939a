"""``kubectl-mcp``, the kubectl plugin: ``kubectl mcp board NAME`` here, every other subcommand
(``gate``, ``health``, ``all``...) handed to ``mcp_checks.cli`` as before.

``kubectl mcp board NAME [-n NS] [--kind mcpr|mcpb]`` prints the board of an MCPReadiness
(default) or an MCPBenchmark and exits 0 when it is Ready for its current spec (an MCPReadiness:
Pass or Warn; an MCPBenchmark: its SLOs met), 1 when it is not (Fail, Inconclusive, Error, still
evaluating or running, or a verdict of an older generation), 2 on a usage error or when the
object cannot be read (not found, no kubeconfig, the API server unreachable or refusing).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from .read import BENCHMARK, KINDS, READINESS, Kind, ReadError, kind_arg, read_object
from .render import EXIT_USAGE, board, exit_code

PROG = "kubectl mcp"
SUMMARY = (
    "board NAME [-n NS] [--kind mcpr|mcpb]: the KPI board of an MCPReadiness (or an MCPBenchmark's "
    "results) on one screen; exit 0 Ready, 1 not, 2 usage or not found (kubectl mcp board --help)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} board", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name", help="the object: NAME, or KIND/NAME (mcpr/NAME, mcpbenchmark/NAME)")
    parser.add_argument("-n", "--namespace", help="default: the kubeconfig's current namespace")
    parser.add_argument(
        "--kind",
        type=kind_arg,
        help=f"mcpr ({READINESS.name}, the default) or mcpb ({BENCHMARK.name})",
    )
    return parser


def _target(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Kind, str]:
    """The kind and name from ``NAME`` or ``KIND/NAME`` and ``--kind`` (which must agree)."""
    kind, name = args.kind, args.name
    if "/" in name:
        prefix, name = name.split("/", 1)
        named = KINDS.get(prefix.lower())
        if named is None:
            parser.error(f"{args.name}: KIND/NAME with KIND mcpr or mcpb")
        if kind is not None and kind != named:
            parser.error(f"{args.name} is a {named.name}, --kind says {kind.name}")
        kind = named
    if not name:
        parser.error("NAME is empty")
    return kind or READINESS, name


def board_main(argv: list[str], console: Console | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    kind, name = _target(parser, args)
    from ..benchmark.report import default_namespace

    namespace = args.namespace or default_namespace()
    try:
        obj = read_object(kind, name, namespace)
    except ReadError as exc:
        print(f"{PROG} board: {exc}", file=sys.stderr)
        return EXIT_USAGE
    (console or Console()).print(board(obj))
    return exit_code(obj)


def kubectl_main(argv: list[str] | None = None) -> int:
    """The ``kubectl-mcp`` executable: kubectl runs it for ``kubectl mcp ...``."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["board"]:
        return board_main(args[1:])
    from mcp_checks.api import kubectl_main as checks_main

    try:
        return checks_main(args)
    except SystemExit as done:
        if done.code == 0 and args[:1] in (["-h"], ["--help"]):
            print(f"\nand, from the operator's package:\n  {SUMMARY}")
        raise


if __name__ == "__main__":
    sys.exit(kubectl_main())
