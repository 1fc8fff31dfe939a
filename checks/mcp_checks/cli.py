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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import argtypes as types
from . import gate
from .exitcodes import ExitCode, for_verdict, table

if TYPE_CHECKING:
    from .verdict import CheckOutcome

# the most xDS sources one check reads: the MCPReadiness API's (xdsSync.sources maxItems), so
# a flag takes what a manifest's field takes
MAX_XDS_SOURCES = 16
# metricDrift's --reference-file: a rules file where the check runs, not a field of the API
# (``mcp_checks.suite.REFERENCE_FILE``)
REFERENCE_FILE = "referenceFile"
SUBCOMMAND_KEYS = {
    "health": "healthProbe",
    "xds": "xdsSync",
    "config": "configConsistency",
    "drift": "metricDrift",
}


class Usage(Exception):
    """A usage error found after parsing (a flag missing for the check asked, a manifest that
    cannot be read): ``main`` reports it through the subcommand's ``parser.error`` (exit 2)."""


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
    config.add_argument("--annotation", help="checksum annotation (default checksum/config)")
    config.add_argument("--application", help="Argo CD Application name (namespace argocd)")
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
        type=types.number(above=0, maximum=1, hint="a relative drift: 0.003 is 0.3%"),
        metavar="RATIO",
        help="relative drift that fails, above 0 and at most 1 (default 0.003, i.e. 0.3%%)",
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


def _set(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != []:
        target[key] = value


def _flag_entry(args: argparse.Namespace) -> dict[str, Any]:
    """One ``spec.checks`` entry from the subcommand's flags (merged over a manifest's)."""
    entry: dict[str, Any] = {}
    if args.check == "health":
        for flag, key in (
            ("path", "path"),
            ("requests", "requests"),
            ("concurrency", "concurrency"),
            ("timeout_ms", "timeoutMs"),
            ("expected_status", "expectedStatus"),
            ("min_success_ratio", "minSuccessRatio"),
            ("max_p50_ms", "maxP50Ms"),
            ("max_p99_ms", "maxP99Ms"),
            ("max_round_ms", "maxRoundMs"),
            ("warn_p99_ms", "warnP99Ms"),
            ("max_prober_lag_ms", "maxProberLagMs"),
        ):
            _set(entry, key, getattr(args, flag))
    elif args.check == "xds":
        sources = [{"kind": "csds", "address": a} for a in args.csds]
        sources += [{"kind": "syncz", "address": a} for a in args.syncz]
        sources += [{"kind": "envoyAdmin", "address": a} for a in args.envoy_admin]
        if len(sources) > MAX_XDS_SOURCES:
            given = (("--csds", args.csds), ("--syncz", args.syncz), ("--envoy-admin", args.envoy_admin))
            flags = [flag for flag, values in given if values]
            raise Usage(
                f"argument {'/'.join(flags)}: at most {MAX_XDS_SOURCES} sources"
                f"{' in all' if len(flags) > 1 else ''} (got {len(sources)})"
            )
        _set(entry, "sources", sources)
        _set(entry, "proxies", _proxies(args))
        _set(entry, "minProxies", args.min_proxies)
        _set(entry, "graceSeconds", args.grace_seconds)
        _set(entry, "expectedVersion", args.expected_version)
        if args.wait:
            entry["waitSeconds"] = args.wait
    elif args.check == "config":
        if args.deployment:
            entry["workload"] = {"kind": "Deployment", "name": args.deployment}
        _set(entry, "configMaps", args.configmap)
        _set(entry, "secrets", args.secret)
        _set(entry, "annotation", args.annotation)
        if args.application:
            entry["application"] = {"name": args.application}
    elif args.check == "drift":
        _set(entry, "prometheusUrl", args.prometheus)
        rules = [dict(zip(("record", "expr"), r.split("=", 1), strict=False)) for r in args.rule]
        _set(entry, "rules", rules)
        _set(entry, "threshold", args.threshold)
        if args.reference_file is not None:  # replaces a manifest's reference
            entry["reference"] = None
            entry[REFERENCE_FILE] = str(args.reference_file)
        else:
            _set(entry, "reference", _drift_reference(args))
    return entry


def _proxies(args: argparse.Namespace) -> dict[str, Any] | None:
    """``xdsSync.proxies`` from the flags: named node IDs, or pods by label or Service."""
    given = (("--proxy", args.proxy), ("--selector", args.selector), ("--service", args.service))
    chosen = [flag for flag, value in given if value]
    if len(chosen) > 1:
        raise Usage(f"{' and '.join(chosen)}: name the proxies one way")
    if args.node_id_template and not (args.selector or args.service):
        raise Usage("--node-id-template goes with --selector or --service")
    if args.proxy:
        return {"ids": args.proxy}
    if not (args.selector or args.service):
        return None
    proxies: dict[str, Any] = {}
    if args.selector:
        proxies["matchLabels"] = dict(pair.split("=", 1) for pair in args.selector)
    _set(proxies, "service", args.service)
    _set(proxies, "nodeIdTemplate", args.node_id_template)
    return proxies


def _drift_reference(args: argparse.Namespace) -> dict[str, Any] | None:
    """``metricDrift.reference`` from the drift flags (each flag's form is checked by its type)."""
    if args.reference_selector and not args.reference_prometheusrules:
        raise Usage("--reference-selector goes with --reference-prometheusrules NAMESPACE")
    if args.reference_prometheusrules:
        namespace, _, name = args.reference_prometheusrules.partition("/")
        selector = dict(pair.split("=", 1) for pair in args.reference_selector)
        if name and selector:
            raise Usage("--reference-selector picks by label in a namespace: not with NAMESPACE/NAME")
        return {
            "prometheusRules": {
                "namespace": namespace,
                **({"name": name} if name else {}),
                **({"selector": selector} if selector else {}),
            }
        }
    if args.reference_configmap:
        parts = args.reference_configmap.split("/")
        return {"configMap": dict(zip(("namespace", "name", "key"), parts, strict=True))}
    return None


def _manifest(path: Path) -> Mapping[str, Any]:
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise Usage(f"argument -f/--file: {path}: {exc}") from exc
    gates = [d for d in docs if isinstance(d, Mapping) and d.get("kind") == "MCPReadiness"]
    if len(gates) != 1:
        raise Usage(f"argument -f/--file: {path}: expected one MCPReadiness, found {len(gates)}")
    gate: Mapping[str, Any] = gates[0]
    from .manifest import spec_problems

    problems = spec_problems(gate.get("spec"))
    if problems:  # as `kubectl apply` would refuse it: a typo must not fall back to a default
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        listed = "".join(f"\n  {p}" for p in problems)
        raise Usage(f"argument -f/--file: {path}: not a valid MCPReadiness ({count}):{listed}")
    return gate


def _missing(check: str, entry: Mapping[str, Any]) -> str | None:
    """What the check asked for lacks that neither the flags nor the manifest gave."""
    manifest = f"or -f MANIFEST with spec.checks.{SUBCOMMAND_KEYS.get(check, '')}"
    if check == "xds" and not entry.get("sources"):
        return f"name a source: --csds HOST:PORT, --syncz URL or --envoy-admin URL ({manifest}.sources)"
    if check == "drift" and not entry.get("prometheusUrl"):
        return f"--prometheus URL is required ({manifest}.prometheusUrl)"
    if check == "drift" and not entry.get("rules"):
        return f"--rule is required: a record name, or record=expr ({manifest}.rules)"
    if check == "config" and not (entry.get("workload") or {}).get("name"):
        return f"--deployment is required ({manifest}.workload.name)"
    if check == "config" and not entry.get("configMaps") and not entry.get("secrets"):
        return f"--configmap or --secret is required: name what is hashed ({manifest}.configMaps)"
    return None


def _plan(args: argparse.Namespace, gate: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None, str]:
    """The ``spec.checks`` to run, the target URL and the namespace; ``Usage`` when the flags
    (with the manifest's, ``gate``: the ``-f`` file's MCPReadiness) do not make a check."""
    checks: dict[str, Any] = {}
    url, namespace = args.url, args.namespace
    if gate is not None:
        spec = gate.get("spec") or {}
        checks = dict(spec.get("checks") or {})
        url = url or (spec.get("target") or {}).get("url")
        namespace = namespace or (gate.get("metadata") or {}).get("namespace")
    if args.check != "all":
        key = SUBCOMMAND_KEYS[args.check]
        entry = {**(checks.get(key) or {}), **_flag_entry(args)}
        missing = _missing(args.check, entry)
        if missing:
            raise Usage(missing)
        # the probe is the one check with `enabled`; asked by name, it runs even if a manifest has it off
        checks = {"healthProbe": {"enabled": False}, key: entry}
        if key == "healthProbe":
            checks[key] = {**entry, "enabled": True}
    elif gate is None:
        raise Usage("-f MANIFEST is required: `all` runs every check a manifest enables")
    if (checks.get("healthProbe") or {}).get("enabled", True) and not url:
        raise Usage("--url is required for the health probe (or -f MANIFEST with spec.target.url)")
    return checks, url, namespace or "default"


# the parts of an MCPReadiness spec only the operator runs, and why
OPERATOR_ONLY = {
    "drill": "staged load and faults need the operator (apply it, then `kubectl mcp board NAME`)",
    "release": "one evaluation per release is the operator's record",
    "watch": "rollouts are watched by the operator",
    "podReadinessGate": "pod conditions are written by the operator",
    "recheckIntervalSeconds": "rechecks are the operator's timer",
}


def skipped_parts(manifest: Mapping[str, Any]) -> list[str]:
    """What a manifest asks that ``mcp-check`` does not run, each with the reason (said, never
    silently dropped: a drill manifest's verdict here is its checks' alone)."""
    spec = manifest.get("spec") or {}
    return [f"spec.{key}: {why}" for key, why in OPERATOR_ONLY.items() if spec.get(key) is not None]


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
        return gate.run(args)
    try:
        manifest = None if args.file is None else _manifest(args.file)
        checks, url, namespace = _plan(args, manifest)
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
