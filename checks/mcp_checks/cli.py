"""``mcp-check``: the operator's assertions without the operator, for CI jobs and Argo CD hooks.

Exit codes: 0 when the verdict is Pass or Warn, 1 on Fail, 3 on Inconclusive or Error (could
not measure), 2 for usage errors; ``--json`` prints the check rows for machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict

from .health import HealthProbeSpec, run_health_probe
from .verdict import CheckOutcome, Verdict, decide

EXIT_CODES = {
    Verdict.PASS: 0,
    Verdict.WARN: 0,
    Verdict.FAIL: 1,
    Verdict.INCONCLUSIVE: 3,
    Verdict.ERROR: 3,
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="check", required=True)
    health = sub.add_parser("health", help="HTTP health probe round")
    health.add_argument(
        "--url", required=True, help="full URL to probe, e.g. http://svc:8000/v2/health/ready"
    )
    health.add_argument("--requests", type=_positive_int, default=10000)
    health.add_argument("--concurrency", type=_positive_int, default=8)
    health.add_argument("--timeout-ms", type=float, default=1000.0)
    health.add_argument("--expected-status", type=int, action="append", help="repeatable; default 200")
    health.add_argument("--min-success-ratio", type=_ratio, default=0.9999)
    health.add_argument("--max-p50-ms", type=float)
    health.add_argument("--max-p99-ms", type=float, default=500.0)
    health.add_argument("--max-round-ms", type=float)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


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
    print(f"verdict: {verdict.outcome.value} score={verdict.score} ready={verdict.ready}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = HealthProbeSpec(
        url=args.url,
        requests=args.requests,
        concurrency=args.concurrency,
        timeout_s=args.timeout_ms / 1000.0,
        expected_status=tuple(args.expected_status or [200]),
        min_success_ratio=args.min_success_ratio,
        max_p50_ms=args.max_p50_ms,
        max_p99_ms=args.max_p99_ms,
        max_round_ms=args.max_round_ms,
    )
    outcomes = [asyncio.run(run_health_probe(spec))]
    _print(outcomes, args.json)
    return EXIT_CODES[decide(outcomes).outcome]


if __name__ == "__main__":
    sys.exit(main())
