"""``mcp-check``: the operator's assertions without the operator, for CI jobs and Argo CD hooks.

``mcp-check health|xds|config|drift|all -f mcpreadiness.yaml`` runs the checks an MCPReadiness
manifest asks for (``all``: every one it enables, concurrently), through the same builder the
operator uses; flags give one check without a manifest.

Exit codes: 0 when the verdict is Pass or Warn, 1 on Fail, 3 on Inconclusive or Error (could
not measure), 2 for usage errors; ``--json`` prints the check rows for machines and
``--junit FILE`` writes a JUnit XML report for CI.

``mcp-check gate mcpreadiness/NAME`` (also ``kubectl mcp gate``) waits for the operator's verdict
of this release instead (``mcp_checks.gate``), with codes of its own: 0 Pass or Warn, 1 Fail at
once, 2 Inconclusive, Error or usage, 3 timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from . import gate
from .junit import write_junit
from .verdict import CheckOutcome, Verdict, decide

EXIT_USAGE = 2
EXIT_CODES = {
    Verdict.PASS: 0,
    Verdict.WARN: 0,
    Verdict.FAIL: 1,
    Verdict.INCONCLUSIVE: 3,
    Verdict.ERROR: 3,
}
SUBCOMMAND_KEYS = {
    "health": "healthProbe",
    "xds": "xdsSync",
    "config": "configConsistency",
    "drift": "metricDrift",
}


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _duration(text: str) -> float:
    """Seconds, plain or with a unit (``90``, ``90s``, ``2m``), above zero."""
    scale = {"s": 1.0, "m": 60.0}.get(text[-1:])
    try:
        value = float(text[:-1]) * scale if scale else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (90, 90s or 2m)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above zero")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--file", type=Path, help="an MCPReadiness manifest: run what its spec.checks asks"
    )
    parser.add_argument("--url", help="target base URL (default: the manifest's spec.target.url)")
    parser.add_argument(
        "--namespace", help="namespace of pods and config (default: the manifest's, or default)"
    )
    parser.add_argument("--kubeconfig", help="for config consistency and proxies selected by label")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--junit", type=Path, help="write a JUnit XML report here")


def build_parser(prog: str = "mcp-check") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="check", required=True)
    gated = sub.add_parser(
        "gate",
        help="wait for the operator's verdict of this release of an MCPReadiness",
        description=gate.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gate.add_arguments(gated)
    health = sub.add_parser("health", help="HTTP health probe round")
    _common(health)
    health.add_argument("--path", default=None, help="with --url: the path probed (default /health)")
    health.add_argument("--requests", type=_positive_int)
    health.add_argument("--concurrency", type=_positive_int)
    health.add_argument("--timeout-ms", type=float)
    health.add_argument("--expected-status", type=int, action="append", help="repeatable; default 200")
    health.add_argument("--min-success-ratio", type=_ratio)
    health.add_argument("--max-p50-ms", type=float)
    health.add_argument("--max-p99-ms", type=float)
    health.add_argument("--max-round-ms", type=float)
    health.add_argument("--warn-p99-ms", type=float)
    health.add_argument("--max-prober-lag-ms", type=float)
    xds = sub.add_parser("xds", help="Envoy xDS sync of the target's proxies")
    _common(xds)
    xds.add_argument("--csds", action="append", default=[], help="CSDS host:port (repeatable)")
    xds.add_argument("--syncz", action="append", default=[], help="istiod debug base URL (repeatable)")
    xds.add_argument("--envoy-admin", action="append", default=[], help="Envoy admin base URL (repeatable)")
    xds.add_argument("--proxy", action="append", help="node ID that must be synced (repeatable)")
    xds.add_argument("--grace-seconds", type=float)
    xds.add_argument(
        "--expected-version", help="the version every proxy must have ACKed (another one counts as stale)"
    )
    xds.add_argument(
        "--wait",
        type=_duration,
        default=0.0,
        metavar="SECONDS",
        help="poll until every proxy is synced (exit 0), one NACKs (exit 1) or SECONDS pass "
        "(Inconclusive ConvergenceTimeout, exit 3); without it one look, where not converged yet "
        "is Inconclusive",
    )
    config = sub.add_parser("config", help="config hash against the rollout and Argo CD")
    _common(config)
    config.add_argument("--deployment", help="workload (Deployment) name")
    config.add_argument("--configmap", action="append", default=[], help="ConfigMap hashed (repeatable)")
    config.add_argument("--secret", action="append", default=[], help="Secret hashed (repeatable)")
    config.add_argument("--annotation", help="checksum annotation (default checksum/config)")
    config.add_argument("--application", help="Argo CD Application name (namespace argocd)")
    drift = sub.add_parser("drift", help="Prometheus recording-rule drift")
    _common(drift)
    drift.add_argument("--prometheus", help="Prometheus base URL")
    drift.add_argument("--rule", action="append", default=[], help="record name, or record=expr (repeatable)")
    drift.add_argument("--threshold", type=float)
    reference = drift.add_mutually_exclusive_group()
    reference.add_argument(
        "--reference-file",
        type=Path,
        help="a Prometheus rules file (or PrometheusRule manifests): what the rules named without "
        "=expr must be; without a reference such a rule is Inconclusive (NoIndependentReference)",
    )
    reference.add_argument(
        "--reference-prometheusrules",
        metavar="NAMESPACE[/NAME]",
        help="the PrometheusRule objects of a namespace (or one by name) as the reference",
    )
    reference.add_argument(
        "--reference-configmap", metavar="NAMESPACE/NAME/KEY", help="a rules file in a ConfigMap key"
    )
    drift.add_argument(
        "--reference-selector",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --reference-prometheusrules NAMESPACE: only those with this label (repeatable)",
    )
    every = sub.add_parser("all", help="every check the manifest enables, concurrently")
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
        _set(entry, "sources", sources)
        if args.proxy:
            entry["proxies"] = {"ids": args.proxy}
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
        _set(entry, "reference", _drift_reference(args))
    return entry


def _drift_reference(args: argparse.Namespace) -> dict[str, Any] | None:
    """``metricDrift.reference`` from the drift flags (a usage error when malformed)."""
    from .suite import SpecError

    if args.reference_selector and not args.reference_prometheusrules:
        raise SpecError("--reference-selector goes with --reference-prometheusrules NAMESPACE")
    if args.reference_file is not None:
        return {"file": str(args.reference_file)}
    if args.reference_prometheusrules:
        namespace, _, name = args.reference_prometheusrules.partition("/")
        selector = dict(pair.split("=", 1) for pair in args.reference_selector if "=" in pair)
        if not namespace or len(selector) != len(args.reference_selector) or (name and selector):
            raise SpecError(
                "--reference-prometheusrules NAMESPACE[/NAME], or NAMESPACE with --reference-selector K=V"
            )
        return {
            "prometheusRules": {
                "namespace": namespace,
                **({"name": name} if name else {}),
                **({"selector": selector} if selector else {}),
            }
        }
    if args.reference_configmap:
        parts = args.reference_configmap.split("/")
        if len(parts) != 3 or not all(parts):
            raise SpecError("--reference-configmap NAMESPACE/NAME/KEY")
        return {"configMap": dict(zip(("namespace", "name", "key"), parts, strict=True))}
    return None


def _manifest(path: Path) -> Mapping[str, Any]:
    from .suite import SpecError

    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    gates = [d for d in docs if d.get("kind") == "MCPReadiness"]
    if len(gates) != 1:
        raise SpecError(f"{path}: expected one MCPReadiness, found {len(gates)}")
    gate: Mapping[str, Any] = gates[0]
    return gate


def _plan(args: argparse.Namespace) -> tuple[dict[str, Any], str | None, str]:
    """The ``spec.checks`` to run, the target URL and the namespace."""
    from .suite import SpecError

    checks: dict[str, Any] = {}
    url, namespace = args.url, args.namespace
    if args.file is not None:
        gate = _manifest(args.file)
        spec = gate.get("spec") or {}
        checks = dict(spec.get("checks") or {})
        url = url or (spec.get("target") or {}).get("url")
        namespace = namespace or (gate.get("metadata") or {}).get("namespace")
    if args.check != "all":
        key = SUBCOMMAND_KEYS[args.check]
        entry = {**(checks.get(key) or {}), **_flag_entry(args)}
        checks = {"healthProbe": {"enabled": False}, key: {**entry, "enabled": True}}
    elif args.file is None:
        raise SpecError("mcp-check all needs -f MANIFEST")
    if (checks.get("healthProbe") or {}).get("enabled", True) and not url:
        raise SpecError("the health probe needs a target: --url or a manifest's spec.target.url")
    return checks, url, namespace or "default"


def _api_client(kubeconfig: str | None) -> Any:
    from kubernetes import client, config

    try:
        config.load_kube_config(config_file=kubeconfig)
    except (config.ConfigException, OSError, TypeError):
        if kubeconfig is not None:
            raise
        return None
    return client.ApiClient()


def _print(outcomes: list[CheckOutcome], as_json: bool) -> None:
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


def main(argv: list[str] | None = None, prog: str = "mcp-check") -> int:
    args = build_parser(prog).parse_args(argv)
    if args.check == "gate":
        return gate.run(args)
    # the checks' dependencies (gRPC, Prometheus client) load only here: the gate starts fast
    from .suite import CheckContext, SpecError, plan_checks, run_checks

    try:
        checks, url, namespace = _plan(args)
        planned = plan_checks(checks)
        if not planned:
            raise SpecError("no check enabled")
    except (SpecError, OSError, yaml.YAMLError) as exc:
        print(f"mcp-check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    context = CheckContext(namespace, url, _api_client(args.kubeconfig))
    outcomes = asyncio.run(run_checks(planned, context))
    _print(outcomes, args.json)
    if args.junit is not None:
        write_junit(outcomes, args.junit)
    return EXIT_CODES[decide(outcomes).outcome]


def kubectl_main(argv: list[str] | None = None) -> int:
    """``kubectl-mcp``: kubectl runs it for ``kubectl mcp ...`` (a kubectl plugin)."""
    return main(argv, prog="kubectl mcp")


if __name__ == "__main__":
    sys.exit(main())
