"""The ``mcp-operator`` command: run the operator, generate CRDs, run a shard, render a
benchmark's or a drill's report. (The local control plane and the demo belong to the test harness:
``mcp-devcluster``.)"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path


def _cmd_crds(args: argparse.Namespace) -> int:
    if sys.flags.optimize >= 2:
        print(
            "mcp-operator crds: run it without -OO (the operator's image sets PYTHONOPTIMIZE=2): "
            "the CRDs' descriptions are the API models' docstrings, which -OO drops",
            file=sys.stderr,
        )
        return 2
    from .crdgen import write_all

    for path in write_all(args.repo):
        print(path)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    import kopf

    from . import handlers, leadership, logs, metrics
    from .handlers.common import current_object
    from .handlers.leaving import abandon
    from .handlers.lifecycle import WATCHED
    from .settings import OperatorSettings

    del handlers  # imported for its registrations
    try:
        logs.setup(args.log_format, verbose=args.verbose, source=current_object)
        lease = leadership.LeaseConfig.from_env(
            name=args.lease_name, namespace=args.lease_namespace, identity=args.identity
        )
    except ValueError as exc:  # a bad MCP_LOG_FORMAT or lease setting (argparse checks only flags)
        print(f"mcp-operator run: {exc}", file=sys.stderr)
        return 2
    settings = OperatorSettings.from_env()
    metrics.serve(settings.metrics_port, settings.metrics_address)  # a standby is scraped too
    namespaces = args.namespace or []

    async def operate() -> None:
        # standalone: kopf's own peering would pause every replica of one Deployment at once
        # (equal priorities); the Lease decides who runs instead (docs/design.md)
        await kopf.operator(
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            memo=kopf.Memo({WATCHED: tuple(namespaces)}),  # the runtime's scope (handlers.lifecycle)
            liveness_endpoint=args.liveness,
            # the Lease's identity: kopf's own default asks the passwd database for the user,
            # and a container's uid (65532 here, any uid on OpenShift) may have no entry there
            identity=lease.identity,  # type: ignore[arg-type]  # kopf's Identity: a str NewType it does not export
        )

    with contextlib.suppress(asyncio.CancelledError):
        asyncio.run(leadership.run(lease, operate, liveness=args.liveness, on_lost=abandon))
    return 0


def _cmd_shard(_args: argparse.Namespace) -> int:
    from .benchmark.shard import run_shard

    logging.basicConfig(level=logging.WARNING)
    return run_shard()


def _cmd_report(args: argparse.Namespace) -> int:
    from mcp_bench.api import MissingExtraError, write_report
    from mcp_checks.api import ExitCode

    from .benchmark.report import ReportError, default_namespace, read_report, status_tables
    from .board.codes import read_error_code
    from .board.read import READINESS, ReadError, read_object
    from .report import write_readiness_report

    namespace = args.namespace or default_namespace()
    html = args.output or Path(f"{args.name}.html")
    try:
        if args.kind == READINESS:
            obj = read_object(READINESS, args.name, namespace)
            written = write_readiness_report(obj, html, args.junit)
            verified = "the MCPReadiness's status, as the API server returned it"
        else:
            doc, benchmark, verified = read_report(args.name, namespace)
            written = write_report(doc, html, args.junit, status_tables(benchmark, verified))
    except MissingExtraError as exc:
        for path in exc.written:  # the JUnit XML needs no plotting library
            print(f"wrote {path}")
        print(f"mcp-operator report: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except (ReportError, ReadError) as exc:
        print(f"mcp-operator report: {exc}", file=sys.stderr)
        return int(exc.code if isinstance(exc, ReportError) else read_error_code(exc))
    for path in written:
        print(f"wrote {path}")
    print(f"report: {verified}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .board.read import BENCHMARK, kind_arg

    parser = argparse.ArgumentParser(prog="mcp-operator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    crds = sub.add_parser(
        "crds",
        help="write what is generated from code: CRDs (crds/, Helm chart) and the operator's RBAC rules",
    )
    crds.add_argument("--repo", type=Path, default=Path("."), help="repository root to write into")
    crds.set_defaults(func=_cmd_crds)

    run = sub.add_parser("run", help="run the operator against the current kubeconfig")
    run.add_argument(
        "--namespace", action="append", help="watch only these namespaces (repeatable; globs ok)"
    )
    run.add_argument("--liveness", default=os.environ.get("MCP_LIVENESS", "http://0.0.0.0:8080/healthz"))
    run.add_argument(
        "--identity",
        help="this process in the leader Lease, unique among the live ones "
        "(env MCP_OPERATOR_IDENTITY, else POD_NAME, else host and pid)",
    )
    run.add_argument(
        "--lease-name",
        help="the leader Lease: one per installation (env MCP_LEASE_NAME; default mcp-operator)",
    )
    run.add_argument(
        "--lease-namespace",
        help="the Lease's namespace (env MCP_LEASE_NAMESPACE, else POD_NAMESPACE, else the service "
        "account's, else default)",
    )
    run.add_argument("--verbose", action="store_true")
    run.add_argument(
        "--log-format",
        choices=("json", "text"),
        default=os.environ.get("MCP_LOG_FORMAT") or None,
        help="json: one JSON object per line (the Deployment's); text: readable lines "
        "(default: text on a terminal, json otherwise; env MCP_LOG_FORMAT)",
    )
    run.set_defaults(func=_cmd_run)

    report = sub.add_parser(
        "report",
        help="render a finished MCPBenchmark's report (as mcp-bench report), or an MCPReadiness's drill "
        "report (--kind mcpr), as one HTML file",
    )
    report.add_argument("name", help="the MCPBenchmark, or with --kind mcpr the MCPReadiness")
    report.add_argument(
        "--kind",
        type=kind_arg,
        default=BENCHMARK,
        help="mcpb (MCPBenchmark, the default: its merged result document) or mcpr (MCPReadiness: its "
        "verdict, a timeline of its drill, KPI board, checks, stages and faults)",
    )
    report.add_argument("--namespace", "-n", help="default: the kubeconfig's current namespace")
    report.add_argument("--output", "-o", type=Path, help="HTML to write (default: NAME.html)")
    report.add_argument(
        "--junit",
        type=Path,
        help="also write JUnit XML, for CI: an MCPBenchmark's SLO judgements, an MCPReadiness's checks",
    )
    report.set_defaults(func=_cmd_report)

    shard = sub.add_parser("shard", help="benchmark shard entrypoint (inside a Job pod)")
    shard.set_defaults(func=_cmd_shard)

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
