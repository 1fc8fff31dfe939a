"""The flags of a run (shared by ``run`` and ``search``) and the plan they build.

A run is given either as a plan file (``--plan``) or as flags; the flags become the same plan
data a file holds, validated by :class:`~mcp_bench.plan.RunPlan`, so both ways are checked alike.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from mcp_bench.cli.common import UsageError
from mcp_bench.cli_observers import add_observer_flags
from mcp_bench.plan import RunPlan

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|ms|s|m)?\s*$")
_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def parse_duration_s(text: str, default_unit: str = "s") -> float:
    """``"120ms"`` -> 0.12, ``"1.5s"``, ``"2m"``; a bare number is in ``default_unit``."""
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"not a duration: {text!r} (examples: 120ms, 1.5s, 2m)")
    return float(m.group(1)) * _UNIT_S[m.group(2) or default_unit]


def parse_latency_sla(text: str) -> tuple[str, float]:
    """``"120ms"`` (P99) or ``"p95:120ms"`` / ``"mean:80ms"`` -> (slo field, milliseconds)."""
    which, _, value = text.rpartition(":")
    which = which.lower() or "p99"
    fields = {"p99": "latency_p99_ms", "p95": "latency_p95_ms", "mean": "latency_mean_ms"}
    if which not in fields:
        raise UsageError(f"--latency-sla percentile must be p99, p95 or mean, got {which!r}")
    return fields[which], parse_duration_s(value, "ms") * 1e3


def _numbers(text: str, kind: type[int] | type[float]) -> list[Any]:
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"expected a comma-separated list of numbers, got {text!r}") from None


# Flags that build a plan; they cannot be combined with --plan.
_PLAN_FLAGS = (
    "url",
    "backend",
    "model",
    "concurrency",
    "rate",
    "arrival",
    "burstiness",
    "max_concurrency",
    "overload",
    "connections",
    "ramp",
    "duration",
    "warmup",
    "requests",
    "timeout",
    "latency_sla",
    "ttft_sla",
    "tpot_sla",
    "throughput_target",
    "max_error_rate",
    "method",
    "body",
    "header",
    "prompt",
    "max_tokens",
    "seed",
    "engine",
)


def _workers_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a process count or 'auto', not {text!r}") from None


def run_flags() -> argparse.ArgumentParser:
    """The flags of a run, as a parent parser of ``run`` and ``search``."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("--plan", help="YAML run plan (instead of the flags below)")
    flags.add_argument("--url", help="target URL (base URL for openai/triton backends)")
    flags.add_argument("--backend", choices=["http", "openai", "openai-chat", "triton-http", "triton-grpc"])
    flags.add_argument("--model", help="model name (LLM and Triton backends)")
    flags.add_argument("--engine", help="load engine: builtin (default), locust, k6")
    flags.add_argument("--concurrency", help="closed loop levels, e.g. 64,256,512")
    flags.add_argument("--rate", help="open loop levels in requests/s, e.g. 10,100")
    flags.add_argument("--arrival", choices=["constant", "poisson", "gamma"])
    flags.add_argument("--burstiness", type=float, help="gamma shape (1 = Poisson, < 1 burstier)")
    flags.add_argument("--max-concurrency", type=int, help="open loop in-flight cap")
    flags.add_argument(
        "--overload", choices=["late", "drop"], help="open loop, cap reached: send late or drop"
    )
    flags.add_argument("--seed", type=int, help="arrival schedule seed")
    flags.add_argument(
        "--connections",
        choices=["warm", "cold", "per-request"],
        help="warm (default): opened before the measured window; cold: opened by the level's "
        "requests; per-request: a new connection for every request",
    )
    flags.add_argument(
        "--ramp", help="e.g. 5s: closed loop starts workers over it, open loop raises the rate over it"
    )
    flags.add_argument(
        "--workers",
        type=_workers_arg,
        help="client processes sharing each level (builtin engine), or 'auto': one per 128 streams "
        "or 1,500 req/s, at most half the cores (default: auto; with --plan, the plan's)",
    )
    flags.add_argument("--duration", help="measured time per level (default 10s)")
    flags.add_argument("--warmup", help="unmeasured warm-up per level")
    flags.add_argument("--requests", type=int, help="measured requests per level")
    flags.add_argument("--timeout", help="request timeout (default 30s)")
    flags.add_argument("--latency-sla", action="append", help="e.g. 120ms (P99), p95:80ms, mean:50ms")
    flags.add_argument("--ttft-sla", help="TTFT P99 objective, e.g. 200ms")
    flags.add_argument("--tpot-sla", help="TPOT P99 objective, e.g. 20ms")
    flags.add_argument("--throughput-target", type=float, help="minimum completed requests/s per level")
    flags.add_argument("--max-error-rate", type=float, help="maximum (failed+dropped)/offered, 0..1")
    flags.add_argument("--method", help="HTTP method for plain http (GET, POST, PUT)")
    flags.add_argument("--body", help="request body for plain http")
    flags.add_argument("--header", action="append", help="'Name: value', repeatable")
    flags.add_argument("--prompt", help="prompt for LLM backends")
    flags.add_argument("--max-tokens", type=int, help="max output tokens for LLM backends")
    flags.add_argument("--output", "-o", help="write the result document (JSON, with CRC-32C)")
    flags.add_argument("--csv", help="write one CSV row per level")
    flags.add_argument("--quiet", "-q", action="store_true", help="no progress bar; one summary line")
    flags.add_argument(
        "--start-at",
        help="begin the first level's window at this wall-clock time (Unix seconds or ISO 8601 with "
        "offset), so shards started on several machines run together",
    )
    flags.add_argument("--k6-binary", help="k6 executable for --engine k6 (default: k6 on PATH; not shipped)")
    add_observer_flags(flags)
    return flags


def plan_from_args(args: argparse.Namespace) -> RunPlan:
    given = [f for f in _PLAN_FLAGS if getattr(args, f) is not None]
    if args.plan is not None:
        if given:
            flags = ", ".join("--" + f.replace("_", "-") for f in given)
            raise UsageError(f"--plan cannot be combined with {flags}")
        return RunPlan.from_yaml(args.plan)
    if args.url is None:
        raise UsageError("give --plan FILE or --url URL")
    if (args.concurrency is None) == (args.rate is None):
        raise UsageError("give exactly one of --concurrency or --rate")
    levels: dict[str, Any] = {}
    if args.concurrency is not None:
        levels["concurrency"] = _numbers(args.concurrency, int)
    else:
        levels["rate"] = _numbers(args.rate, float)
    for flag, key in (
        ("arrival", "arrival"),
        ("burstiness", "burstiness"),
        ("max_concurrency", "max_concurrency"),
        ("overload", "overload"),
        ("seed", "seed"),
        ("connections", "connections"),
    ):
        if getattr(args, flag) is not None:
            levels[key] = getattr(args, flag)
    if args.ramp is not None:
        levels["ramp_s"] = parse_duration_s(args.ramp)
    stage: dict[str, Any] = {}
    if args.duration is not None:
        stage["duration_s"] = parse_duration_s(args.duration)
    if args.warmup is not None:
        stage["warmup_s"] = parse_duration_s(args.warmup)
    if args.requests is not None:
        stage["requests"] = args.requests
    if not stage.get("duration_s") and not stage.get("requests"):
        stage["duration_s"] = 10.0
    slo: dict[str, Any] = {}
    for text in args.latency_sla or []:
        key, ms = parse_latency_sla(text)
        slo[key] = ms
    if args.ttft_sla is not None:
        slo["ttft_p99_ms"] = parse_duration_s(args.ttft_sla, "ms") * 1e3
    if args.tpot_sla is not None:
        slo["tpot_p99_ms"] = parse_duration_s(args.tpot_sla, "ms") * 1e3
    if args.throughput_target is not None:
        slo["throughput_rps"] = args.throughput_target
    if args.max_error_rate is not None:
        slo["max_error_rate"] = args.max_error_rate
    payload: dict[str, Any] = {}
    if args.method is not None:
        payload["method"] = args.method.upper()
    if args.body is not None:
        payload["body"] = args.body
    if args.header:
        headers = {}
        for h in args.header:
            name, sep, value = h.partition(":")
            if not sep:
                raise UsageError(f"--header must be 'Name: value', got {h!r}")
            headers[name.strip()] = value.strip()
        payload["headers"] = headers
    if args.prompt is not None:
        payload["prompt"] = args.prompt
    if args.max_tokens is not None:
        payload["max_output_tokens"] = args.max_tokens
    data: dict[str, Any] = {"url": args.url, "levels": levels, "stage": stage, "slo": slo, "payload": payload}
    for flag in ("backend", "model", "engine"):
        if getattr(args, flag) is not None:
            data[flag] = getattr(args, flag)
    if args.timeout is not None:
        data["request_timeout_s"] = parse_duration_s(args.timeout)
    return RunPlan.from_dict(data, source="command line")


def with_timeline_interval(plan: RunPlan, text: str) -> RunPlan:
    """The plan with ``observe.timeline_interval_s`` from ``--server-metrics-interval`` ('off': none)."""
    interval = None if text.strip().lower() == "off" else parse_duration_s(text)
    try:
        observe = plan.observe.model_validate({**plan.observe.model_dump(), "timeline_interval_s": interval})
    except ValueError as exc:
        raise UsageError(f"--server-metrics-interval {text!r}: 50ms to 60s, or off") from exc
    return plan.model_copy(update={"observe": observe})
