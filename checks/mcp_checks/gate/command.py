"""``mcp-check gate``: the command that waits, prints the verdict table and writes JUnit XML."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from typing import Any

from ..exitcodes import ExitCode
from ..verdict import CheckOutcome, Verdict
from .args import UsageError, parse_time
from .judge import Decision, Wanted
from .source import ApiSource, CannotAppear, GateApiError, GateSource, connect
from .wait import wait_for_verdict


def print_decision(name: str, namespace: str, decision: Decision, took_s: float, out: Any = None) -> None:
    out = out or sys.stdout
    release = decision.release
    print(
        f"mcpreadiness/{name} ({namespace}): {decision.verdict} ({decision.reason}) after {took_s:.1f}s",
        file=out,
    )
    if release is not None:
        parts = [
            f"{label} {value}"
            for label, value in (
                ("revision", release.revision),
                ("workload", release.workload),
                ("template", release.workload_template_hash),
                ("Application revision", release.application_revision),
                ("trigger", release.trigger),
                ("started", release.started_at),
                ("completed", release.completed_at),
            )
            if value is not None
        ]
        print("release: " + ", ".join(parts), file=out)
    if decision.note:
        print(f"note: {decision.note}", file=out)
    rows = [(o.name, o.outcome.value, o.reason, o.message) for o in decision.outcomes]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(("CHECK", "VERDICT", "REASON"))]
    print(f"{'CHECK':<{widths[0]}}  {'VERDICT':<{widths[1]}}  {'REASON':<{widths[2]}}  MESSAGE", file=out)
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}", file=out)
    for o in decision.outcomes:
        if o.observed:
            print(f"  {o.name}: " + ", ".join(f"{k}={v}" for k, v in o.observed.items()), file=out)
        for finding in o.findings[:20]:
            print(
                f"    {finding.outcome.value} {finding.reason} {finding.subject}: {finding.observed}",
                file=out,
            )


def run(args: argparse.Namespace, source: GateSource | None = None, out: Any = None) -> int:
    """The gate command; ``source`` replaces the API server in tests."""
    began = dt.datetime.now(dt.UTC)
    clock_start = time.monotonic()
    out = out or sys.stdout
    name, timeout_s = args.resource, args.timeout  # checked by their argparse types
    wanted = Wanted(args.release, args.since)
    if wanted.release is None and wanted.since is None:
        wanted = Wanted(since=began)
    namespace = args.namespace
    try:
        if source is None:
            kubeconfig = None if args.kubeconfig is None else str(args.kubeconfig)
            api, configured = connect(kubeconfig, args.context)
            namespace = namespace or configured or "default"
            source = ApiSource(api, namespace, name)
        namespace = namespace or "default"
    except UsageError as exc:  # the kubeconfig or its context: argparse's usage error, exit 2
        usage_error = getattr(args, "usage_error", None)
        if usage_error is not None:
            usage_error(str(exc))
        print(f"mcp-check gate: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    print(
        f"mcpreadiness/{name} ({namespace}): waiting up to {timeout_s:.0f}s for {wanted.describe()}", file=out
    )
    try:
        decision = wait_for_verdict(
            source, wanted, timeout_s, note=lambda text: print(f"  {text}", file=sys.stderr)
        )
    except CannotAppear as exc:  # a usage error: nothing to wait for
        print(f"mcp-check gate: error: mcpreadiness/{name} cannot appear: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except GateApiError as exc:
        message = f"the API server refused: {exc}"
        decision = Decision(
            ExitCode.NOT_VERIFIED,
            "Error",
            "ApiError",
            message,
            [CheckOutcome("gate", Verdict.ERROR, "ApiError", message)],
        )
    print_decision(name, namespace, decision, time.monotonic() - clock_start, out)
    if args.junit is not None:
        from ..junit import junit_xml

        report = junit_xml(decision.outcomes, suite=f"mcpreadiness/{name}", elapsed_s=_evaluation_s(decision))
        args.junit.write_text(report, encoding="utf-8")
    return int(decision.code)


def _evaluation_s(decision: Decision) -> float | None:
    """How long the operator's evaluation took (``startedAt`` to ``completedAt``), for the JUnit
    suite's time; None where the release does not say (the rows' times are summed instead)."""
    release = decision.release
    if release is None or release.completed_at is None:
        return None
    try:
        started, completed = parse_time(release.started_at), parse_time(release.completed_at)
    except UsageError:
        return None
    return max(0.0, (completed - started).total_seconds())
