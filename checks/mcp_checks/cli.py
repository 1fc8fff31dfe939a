"""``mcp-check``: the operator's assertions without the operator, for CI jobs and Argo CD hooks.

``mcp-check health|xds|config|drift|all -f mcpreadiness.yaml`` runs the checks an MCPReadiness
manifest asks for (``all``: every one it enables, concurrently), through the same builder the
operator uses; flags give one check without a manifest.

``--json`` prints the check rows for machines and ``--junit FILE`` writes a JUnit XML report
for CI (with each check's time).

``mcp-check gate mcpreadiness/NAME`` (also ``kubectl mcp gate``) waits for the operator's verdict
of this release instead (``mcp_checks.gate``). Both exit with the codes of
``mcp_checks.exitcodes`` (the table below), as ``kubectl mcp board`` does; a bad or missing flag
is a usage error (2) that names the flag, before anything runs.
"""

from __future__ import annotations

# Start-up: ``--help`` and usage errors load the standard library and this package's small
# modules only; the checks' dependencies (aiohttp, gRPC, the Prometheus and Kubernetes clients,
# YAML) are imported where a check runs, so a wrong flag costs no more than ``--help``.
import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import argtypes as types
from . import gate
from .cliplan import Usage, plan, read_manifest, skipped_parts
from .defaults import ARGO_CD_NAMESPACE, DEFAULT_ANNOTATION, DEFAULT_THRESHOLD
from .exitcodes import ExitCode, for_verdict, table

if TYPE_CHECKING:
    from .verdict import CheckOutcome


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--file",
        type=types.existing_file,
        help="an MCPReadiness manifest: run what its spec.checks asks",
    )
    parser.add_argument(
        "--url", type=types.http_url, help="target base URL (default: the manifest's spec.target.url)"
    )
    parser.add_argument(
        "--namespace", help="namespace of pods and config (default: the manifest's, or default)"
    )
    parser.add_argument(
        "--kubeconfig",
        type=types.existing_file,
        help="for config consistency and proxies selected by label",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--junit", type=types.output_file, metavar="FILE", help="write a JUnit XML report here"
    )


def _subcommand(sub: Any, name: str, text: str, **kwargs: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=text, epilog=table(), formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
    )
    parser.set_defaults(usage_error=parser.error)
    return parser


def build_parser(prog: str = "mcp-check", listed: Sequence[tuple[str, str]] = ()) -> argparse.ArgumentParser:
    """The parser; ``listed``: (name, help) of the subcommands the caller runs itself (``kubectl
    mcp board``), shown in the help beside these."""
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, epilog=table(), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="check", required=True)
    for name, text in listed:
        sub.add_parser(name, help=text, add_help=False)
    gated = _subcommand(
        sub,
        "gate",
        "wait for the operator's verdict of this release of an MCPReadiness",
        description=gate.__doc__,
    )
    gate.add_arguments(gated)
    health = _subcommand(sub, "health", "HTTP health probe round")
    _common(health)
    health.add_argument(
        "--path", type=types.url_path, default=None, help="with --url: the path probed (default /health)"
    )
    health.add_argument(
        "--requests", type=types.integer(minimum=1, maximum=100000), help="probes in the round"
    )
    health.add_argument("--concurrency", type=types.integer(minimum=1, maximum=256), help="probes in flight")
    health.add_argument(
        "--timeout-ms", type=types.number(above=0, maximum=60000), help="per-request timeout (ms)"
    )
    health.add_argument(
        "--expected-status",
        type=types.integer(minimum=100, maximum=599),
        action="append",
        help="an HTTP status that counts as success (repeatable; default 200)",
    )
    health.add_argument(
        "--min-success-ratio",
        type=types.number(
            minimum=0.5, maximum=1, hint="a share: 0.99 is 99%; below 0.5 a failing server passes"
        ),
        help="lowest share of successful probes, 0.5 to 1 (0.99 is 99%%)",
    )
    for flag, text in (
        ("--max-p50-ms", "highest median latency (ms)"),
        ("--max-p99-ms", "highest P99 latency (ms)"),
        ("--max-round-ms", "highest wall time of the round (ms)"),
        ("--warn-p99-ms", "a P99 above this (and within --max-p99-ms) warns (ms)"),
    ):
        health.add_argument(flag, type=types.number(above=0), help=text)
    health.add_argument(
        "--max-prober-lag-ms",
        type=types.number(above=0, maximum=10000),
        help="the prober's own lag above which a breach is no evidence (ms)",
    )
    xds = _subcommand(sub, "xds", "Envoy xDS sync of the target's proxies")
    _common(xds)
    xds.add_argument(
        "--csds",
        type=types.host_port,
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a CSDS gRPC service, plaintext (repeatable)",
    )
    xds.add_argument(
        "--syncz",
        type=types.http_url,
        action="append",
        default=[],
        metavar="URL",
        help="istiod debug base URL, e.g. http://istiod:15014 (repeatable)",
    )
    xds.add_argument(
        "--envoy-admin",
        type=types.http_url,
        action="append",
        default=[],
        metavar="URL",
        help="Envoy admin base URL, e.g. http://pod:15000 (repeatable)",
    )
    xds.add_argument("--proxy", action="append", help="node ID that must be synced (repeatable)")
    xds.add_argument(
        "--selector",
        type=types.key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --kubeconfig: the ready pods with this label must be synced (repeatable)",
    )
    xds.add_argument(
        "--service", help="with --kubeconfig: the ready pods this Service selects must be synced"
    )
    xds.add_argument(
        "--node-id-template",
        metavar="TEMPLATE",
        help="a selected pod's node ID from {pod}, {namespace}, {ip} (default {pod}.{namespace})",
    )
    xds.add_argument(
        "--min-proxies",
        type=types.integer(minimum=0, maximum=100000),
        metavar="N",
        help="at least N proxies must be reported; without it (or --proxy, --selector, --service) "
        "nothing says who should be there and the check cannot pass (0 lets none pass)",
    )
    xds.add_argument(
        "--grace-seconds",
        type=types.duration(minimum=0, maximum=3600),
        metavar="SECONDS",
        help="stale for less than this has not converged yet (Inconclusive), longer fails "
        "(0 to 3600; default 30)",
    )
    xds.add_argument(
        "--changed-at",
        type=types.instant,
        metavar="TIME",
        help="with --expected-version: when that version was published (RFC 3339 or Unix seconds); "
        "staleness counts from then (default: this run's first look)",
    )
    xds.add_argument(
        "--expected-version", help="the version every proxy must have ACKed (another one counts as stale)"
    )
    xds.add_argument(
        "--wait",
        type=types.duration(above=0, maximum=3600),
        default=0.0,
        metavar="SECONDS",
        help="poll until every proxy is synced (exit 0), any look fails (a NACK, a proxy gone or "
        "missing: exit 1) or SECONDS pass (Inconclusive ConvergenceTimeout, exit 3); without it one "
        "look, where not converged yet is Inconclusive",
    )
    config = _subcommand(sub, "config", "config hash against the rollout and Argo CD")
    _common(config)
    config.add_argument("--deployment", help="workload (Deployment) name")
    config.add_argument("--configmap", action="append", default=[], help="ConfigMap hashed (repeatable)")
    config.add_argument("--secret", action="append", default=[], help="Secret hashed (repeatable)")
    config.add_argument("--annotation", help=f"checksum annotation (default {DEFAULT_ANNOTATION})")
    config.add_argument("--application", help=f"Argo CD Application name (namespace {ARGO_CD_NAMESPACE})")
    drift = _subcommand(sub, "drift", "Prometheus recording-rule drift")
    _common(drift)
    drift.add_argument("--prometheus", type=types.http_url, metavar="URL", help="Prometheus base URL")
    drift.add_argument(
        "--rule",
        type=types.recording_rule,
        action="append",
        default=[],
        help="record name, or record=expr (repeatable)",
    )
    drift.add_argument(
        "--threshold",
        type=types.number(
            above=0, maximum=1, hint=f"a relative drift: {DEFAULT_THRESHOLD:g} is {DEFAULT_THRESHOLD:.1%}"
        ),
        metavar="RATIO",
        help=f"relative drift that fails, above 0 and at most 1 (default {DEFAULT_THRESHOLD:g}, i.e. "
        f"{DEFAULT_THRESHOLD:.1%}%)",
    )
    reference = drift.add_mutually_exclusive_group()
    reference.add_argument(
        "--reference-file",
        type=types.existing_file,
        help="a Prometheus rules file (or PrometheusRule manifests): what the rules named without "
        "=expr must be; without a reference such a rule is Inconclusive (NoIndependentReference)",
    )
    reference.add_argument(
        "--reference-prometheusrules",
        type=types.slash_parts("NAMESPACE[/NAME]", 1, optional=1),
        metavar="NAMESPACE[/NAME]",
        help="the PrometheusRule objects of a namespace (or one by name) as the reference",
    )
    reference.add_argument(
        "--reference-configmap",
        type=types.slash_parts("NAMESPACE/NAME/KEY", 3),
        metavar="NAMESPACE/NAME/KEY",
        help="a rules file in a ConfigMap key",
    )
    drift.add_argument(
        "--reference-selector",
        type=types.key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --reference-prometheusrules NAMESPACE: only those with this label (repeatable)",
    )
    every = _subcommand(sub, "all", "every check the manifest enables, concurrently")
    _common(every)
    return parser


def _api_client(kubeconfig: Path | None) -> Any:
    from kubernetes import client, config

    try:
        config.load_kube_config(config_file=None if kubeconfig is None else str(kubeconfig))
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        if kubeconfig is not None:
            raise Usage(f"argument --kubeconfig: {kubeconfig} is not a usable kubeconfig: {exc}") from exc
        return None
    return client.ApiClient()


def _print(outcomes: list[CheckOutcome], as_json: bool) -> None:
    import json
    from dataclasses import asdict

    from .verdict import decide

    verdict = decide(outcomes)
    if as_json:
        print(
            json.dumps(
                {
                    "verdict": verdict.outcome.value,
                    "score": verdict.score,
                    "ready": verdict.ready,
                    "reason": verdict.reason,
                    "checks": [asdict(o) for o in outcomes],
                },
                indent=2,
            )
        )
        return
    for o in outcomes:
        figures = ", ".join(f"{k}={v}" for k, v in o.observed.items())
        print(f"{o.name}: {o.outcome.value} ({o.reason}) {o.message}\n  {figures}")
        for finding in o.findings[:20]:
            print(f"    {finding.outcome.value} {finding.reason} {finding.subject}: {finding.observed}")
    print(f"verdict: {verdict.outcome.value} score={verdict.score} ready={verdict.ready}")


def _usage(args: argparse.Namespace, message: str) -> NoReturn:
    args.usage_error(message)  # the subcommand's parser.error: its usage line, the message, exit 2
    raise SystemExit(ExitCode.USAGE)  # not reached


def main(
    argv: list[str] | None = None, prog: str = "mcp-check", listed: Sequence[tuple[str, str]] = ()
) -> int:
    parser = build_parser(prog, listed)
    args = parser.parse_args(argv)
    if args.check in dict(listed):  # the caller runs it before this parser
        parser.error(f"{args.check} is not run here")
    if args.check == "gate":
        from .gate.command import run as run_gate

        return run_gate(args)
    try:
        manifest = None if args.file is None else read_manifest(args.file)
        checks, url, namespace = plan(args, manifest)
    except Usage as exc:
        _usage(args, str(exc))
    # the checks' dependencies (aiohttp, gRPC, the Prometheus and Kubernetes clients) load only
    # here, once the flags are known to make a check
    import asyncio
    import time

    from .junit import write_junit
    from .suite import CheckContext, SpecError, plan_checks, run_checks
    from .verdict import decide

    try:
        planned = plan_checks(checks)
        if not planned:
            raise SpecError("no check enabled")
        api_client = _api_client(args.kubeconfig)
    except SpecError as exc:
        _usage(args, f"{args.file}: {exc}" if args.file is not None else str(exc))
    except Usage as exc:
        _usage(args, str(exc))
    for part in skipped_parts(manifest or {}):
        print(f"skipped {part}", file=sys.stderr)
    context = CheckContext(namespace, url, api_client, xds_memory=_xds_memory(args))
    started = time.monotonic()
    outcomes = asyncio.run(run_checks(planned, context))
    elapsed_s = time.monotonic() - started
    _print(outcomes, args.json)
    if args.junit is not None:
        write_junit(outcomes, args.junit, elapsed_s=elapsed_s)
    return int(for_verdict(decide(outcomes).outcome))


def _xds_memory(args: argparse.Namespace) -> Any:
    """What this run's xDS look starts from: the version published at ``--changed-at``."""
    from .xds import XdsMemory

    changed_at = getattr(args, "changed_at", None)
    if changed_at is None:
        return None
    if not args.expected_version:
        _usage(args, "--changed-at goes with --expected-version")
    return XdsMemory(expected_version=args.expected_version, version_since=changed_at)


def kubectl_main(argv: list[str] | None = None, listed: Sequence[tuple[str, str]] = ()) -> int:
    """``kubectl-mcp``: kubectl runs it for ``kubectl mcp ...`` (a kubectl plugin), with the
    subcommands the plugin runs itself (``listed``) in its help."""
    return main(argv, prog="kubectl mcp", listed=listed)


if __name__ == "__main__":
    sys.exit(main())
