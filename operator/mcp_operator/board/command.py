"""``kubectl-mcp``, the kubectl plugin: ``kubectl mcp board NAME`` here, every other subcommand
(``gate``, ``health``, ``all``...) handed to ``mcp_checks.cli`` as before.

``kubectl mcp board NAME [-n NS] [--kind mcpr|mcpb]`` prints the board of an MCPReadiness
(default) or an MCPBenchmark and exits with the codes every ``kubectl mcp`` command shares (the
table below, ``mcp_checks.api.ExitCode``): 0 when it is Ready for its current spec (an
MCPReadiness: Pass or Warn; an MCPBenchmark: its SLOs met), 1 on a Fail of its current spec, 2 on
a usage error or an object that is not there, 3 when nothing is verified (Inconclusive, Error,
still evaluating or running, a verdict of an older generation, the API server unreachable or
refusing).
"""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console

from mcp_checks.api import exit_code_table

from .codes import object_code, read_error_code
from .read import BENCHMARK, KINDS, READINESS, Kind, ReadError, context_namespace, kind_arg, read_object
from .render import board

PROG = "kubectl mcp"
SUMMARY = (
    "board NAME [-n NS] [--kind mcpr|mcpb]: the KPI board of an MCPReadiness (or an MCPBenchmark's "
    "results) on one screen; exit 0 Ready, 1 Fail, 2 usage or not found, 3 not verified (kubectl mcp "
    "board --help)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} board",
        description=__doc__,
        epilog=exit_code_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", help="the object: NAME, or KIND/NAME (mcpr/NAME, mcpbenchmark/NAME)")
    parser.add_argument("-n", "--namespace", help="default: the kubeconfig's current namespace")
    parser.add_argument(
        "--kind",
        type=kind_arg,
        help=f"mcpr ({READINESS.name}, the default) or mcpb ({BENCHMARK.name})",
    )
    parser.add_argument(
        "--kubeconfig",
        type=_existing_file,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument("--context", help="kubeconfig context")
    return parser


def _existing_file(text: str) -> str:
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return text


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

    if args.namespace is not None:
        namespace = args.namespace
    elif args.kubeconfig is not None or args.context is not None:
        namespace = context_namespace(args.kubeconfig, args.context) or "default"
    else:
        namespace = default_namespace()
    try:
        obj = read_object(kind, name, namespace, args.kubeconfig, args.context)
    except ReadError as exc:
        if exc.usage and not exc.missing:  # the kubeconfig or its context, as the gate says it
            parser.error(str(exc))
        print(f"{PROG} board: {exc}", file=sys.stderr)
        return int(read_error_code(exc))
    (console or Console()).print(board(obj))
    return int(object_code(obj))


def kubectl_main(argv: list[str] | None = None) -> int:
    """The ``kubectl-mcp`` executable: kubectl runs it for ``kubectl mcp ...``."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["board"]:
        return board_main(args[1:])
    from mcp_checks.api import kubectl_main as checks_main

    return checks_main(args, listed=[("board", SUMMARY.removeprefix("board "))])  # in its --help


if __name__ == "__main__":
    sys.exit(kubectl_main())
