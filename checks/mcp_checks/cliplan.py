"""What an ``mcp-check`` command line asks to run: the ``spec.checks`` entries its flags make,
merged over an ``-f`` manifest's, the target URL and the namespace. Standard library only
(YAML where a manifest is read): a usage error costs no more than ``--help``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .defaults import MAX_XDS_SOURCES, REFERENCE_FILE

__all__ = [
    "MAX_XDS_SOURCES",
    "OPERATOR_ONLY",
    "SUBCOMMAND_KEYS",
    "Usage",
    "flag_entry",
    "missing",
    "plan",
    "read_manifest",
    "skipped_parts",
]

SUBCOMMAND_KEYS = {
    "health": "healthProbe",
    "xds": "xdsSync",
    "config": "configConsistency",
    "drift": "metricDrift",
}


class Usage(Exception):
    """A usage error found after parsing (a flag missing for the check asked, a manifest that
    cannot be read): ``main`` reports it through the subcommand's ``parser.error`` (exit 2)."""


def _set(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != []:
        target[key] = value


def flag_entry(args: argparse.Namespace) -> dict[str, Any]:
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


def read_manifest(path: Path) -> Mapping[str, Any]:
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


def missing(check: str, entry: Mapping[str, Any]) -> str | None:
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


def plan(args: argparse.Namespace, gate: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None, str]:
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
        entry = {**(checks.get(key) or {}), **flag_entry(args)}
        missing_part = missing(args.check, entry)
        if missing_part:
            raise Usage(missing_part)
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
