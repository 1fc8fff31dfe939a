"""``mcp-bench``: run a benchmark, merge shard results, show, chart, report or diagnose a result.

Exit codes (for CI): 0 every SLO passed (or none was set), 1 an SLO was missed, 2 bad usage, plan
or input file, 3 the run measured nothing (no request completed). ``diagnose``: 0 no trap found,
1 at least one found, 2 bad usage or input. ``forensics``: 0 nothing found, 1 a finding, 3 no
memory readings to judge.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from mcp_bench.cli_observers import ObserverArgError, add_observer_flags, build_observers
from mcp_bench.engines import RunObserver, UnknownBackendError, UnknownEngineError, run_plan_sync
from mcp_bench.engines.external import ExternalEngineError
from mcp_bench.engines.gate import StartAtGate, parse_start_at
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.report import csv_text, print_report
from mcp_bench.results import (
    ChecksumMismatchError,
    DocumentFormatError,
    MergeError,
    ResultDocument,
    dumps_document,
    loads_document,
    merge_documents,
)
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult
from mcp_bench.results.merge import MIN_OVERLAP
from mcp_bench.search.cli import add_search_flags, print_search, search_line, with_search
from mcp_bench.telemetry.serve import add_sampler_command

EXIT_OK, EXIT_SLO, EXIT_USAGE, EXIT_NOTHING = 0, 1, 2, 3

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|ms|s|m)?\s*$")
_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


class UsageError(ValueError):
    pass


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


class ProgressObserver(RunObserver):
    """A progress bar per level on a terminal."""

    def __init__(self, progress: Progress) -> None:
        self.progress_bar = progress
        self._task: TaskID | None = None

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        label = f"c={meta.concurrency}" if meta.mode == "closed" else f"r={meta.requested_rate:g}/s"
        self._task = self.progress_bar.add_task(label, total=1.0, ok=0, err=0)

    def progress(self, meta: LevelMeta, fraction: float, completed: int, failed: int) -> None:
        if self._task is not None:
            self.progress_bar.update(self._task, completed=fraction, ok=completed, err=failed)

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        if self._task is not None:
            self.progress_bar.update(self._task, completed=1.0, ok=result.completed, err=result.failed)


def exit_code(doc: ResultDocument) -> int:
    if not doc.measured_anything:
        return EXIT_NOTHING
    return EXIT_SLO if doc.slo_passed is False else EXIT_OK


def _write_outputs(doc: ResultDocument, output: str | None, csv_path: str | None) -> None:
    if output:
        Path(output).write_text(dumps_document(doc) + "\n", encoding="utf-8")
    if csv_path:
        Path(csv_path).write_text(csv_text(doc), encoding="utf-8")


def _summary_line(doc: ResultDocument) -> str:
    parts = []
    for lv in doc.levels:
        p99 = lv.latency.get("e2e")
        parts.append(
            f"{lv.level_label} ok={lv.completed} err={lv.failed + lv.dropped} "
            f"p99={'-' if p99 is None or p99.p99_ms is None else f'{p99.p99_ms:.2f}ms'}"
        )
    verdict = {None: "no SLO", True: "SLO pass", False: "SLO FAIL"}[doc.slo_passed]
    return "; ".join(parts) + f" | {verdict}"


def _execute(plan: RunPlan, observers: list[RunObserver], k6_binary: str | None) -> ResultDocument:
    if k6_binary is None:
        return run_plan_sync(plan, observers)
    if plan.engine != "k6":
        raise UsageError(f"--k6-binary is for the k6 engine; the plan's engine is {plan.engine!r}")
    from mcp_bench.engines.k6 import K6Engine

    return asyncio.run(K6Engine(binary=k6_binary).run(plan, observers))


def _workers_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a process count or 'auto', not {text!r}") from None


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    plan = plan_from_args(args)
    if getattr(args, "search", False):
        try:
            plan = with_search(plan, args)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    # quick runs choose their client processes by default (one process at 512 streams measured
    # itself); a plan file keeps what it says unless --workers is given
    workers = args.workers if args.workers is not None else ("auto" if args.plan is None else None)
    if workers is not None:
        plan = RunPlan.from_dict({**plan.model_dump(), "workers": workers}, source="--workers")
    if args.server_metrics_interval is not None:
        plan = with_timeline_interval(plan, args.server_metrics_interval)
    observers = build_observers(
        plan,
        None if args.gpu_telemetry is None else parse_duration_s(args.gpu_telemetry, "ms"),
        args.server_metrics or (),
        args.prometheus,
        args.promql or (),
        args.triton_stats or (),
    )
    if args.start_at is not None:
        try:
            observers.append(StartAtGate(parse_start_at(args.start_at)))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    show_progress = not args.quiet and err.is_terminal
    if show_progress:
        progress = Progress(
            TextColumn("{task.description:>12}"),
            BarColumn(),
            TextColumn("ok {task.fields[ok]} err {task.fields[err]}"),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )
        with progress:
            doc = _execute(plan, [*observers, ProgressObserver(progress)], args.k6_binary)
    else:
        doc = _execute(plan, observers, args.k6_binary)
    _write_outputs(doc, args.output, args.csv)
    if args.quiet:
        out.print(_summary_line(doc), highlight=False)
        if doc.search is not None:
            out.print(search_line(doc.search), highlight=False)
    else:
        print_report(doc, out)
        if doc.search is not None:
            print_search(doc.search, out)
    code = exit_code(doc)
    if code == EXIT_NOTHING:
        err.print("no request completed: nothing was measured (see errors above)", highlight=False)
    return code


def _load(path: str) -> ResultDocument:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from exc
    try:
        return loads_document(text)
    except (ChecksumMismatchError, DocumentFormatError) as exc:
        raise UsageError(f"{path}: {exc}") from exc


def cmd_merge(args: argparse.Namespace, out: Console, err: Console) -> int:
    docs = [_load(p) for p in args.files]
    merged = merge_documents(docs, min_overlap=args.min_overlap)
    _write_outputs(merged, args.output, args.csv)
    if not args.output:
        out.print(dumps_document(merged), highlight=False, soft_wrap=True)
    elif not args.quiet:
        print_report(merged, out)
    return exit_code(merged) if args.check else EXIT_OK


def cmd_show(args: argparse.Namespace, out: Console, err: Console) -> int:
    doc = _load(args.file)
    if args.csv:
        Path(args.csv).write_text(csv_text(doc), encoding="utf-8")
    print_report(doc, out)
    if doc.search is not None:
        print_search(doc.search, out)
    return exit_code(doc) if args.check else EXIT_OK


def cmd_plot(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        from mcp_bench.plot import plot_result  # matplotlib only when a chart is asked for
    except ModuleNotFoundError as missing:
        if missing.name != "matplotlib" and not (missing.name or "").startswith("matplotlib."):
            raise
        err.print("mcp-bench plot needs matplotlib: pip install 'mcp-operator[plot]'", markup=False)
        return EXIT_USAGE
    path = plot_result(_load(args.file), Path(args.output))
    out.print(f"wrote {path}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    """One self-contained HTML report of a verified result, and JUnit XML of its SLO checks."""
    from mcp_bench.reportfiles import MissingExtraError, write_report

    doc = _load(args.file)
    html = Path(args.output) if args.output else Path(args.file).with_suffix(".html")
    try:
        written = write_report(doc, html, None if args.junit is None else Path(args.junit))
    except MissingExtraError as exc:
        for path in exc.written:  # the JUnit XML needs no plotting library
            out.print(f"wrote {path}", highlight=False)
        err.print(f"mcp-bench report: {exc}", markup=False)
        return EXIT_USAGE
    for path in written:
        out.print(f"wrote {path}", highlight=False)
    return exit_code(doc) if args.check else EXIT_OK


def cmd_diagnose(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The trap detectors over a result (and a trace, Nsight Compute reports, a second run)."""
    from mcp_bench.diagnose import (
        FOUND,
        DiagnoseInputs,
        NcuFormatError,
        ThresholdError,
        TraceFormatError,
        diagnose,
        load_ncu,
        load_trace,
    )
    from mcp_bench.diagnose.render import findings_json, print_findings

    if args.file is None and args.trace is None and args.ncu is None:
        raise UsageError("give a result document, --trace or --ncu (or several)")
    try:
        inputs = DiagnoseInputs(
            document=None if args.file is None else _load(args.file),
            compare=None if args.compare is None else _load(args.compare),
            trace=None if args.trace is None else load_trace(args.trace),
            ncu=None if args.ncu is None else load_ncu(args.ncu),
            ncu_baseline=None if args.ncu_baseline is None else load_ncu(args.ncu_baseline),
        )
        findings = diagnose(inputs, args.threshold or ())
    except (OSError, TraceFormatError, NcuFormatError, ThresholdError) as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        out.print(findings_json(findings), highlight=False, soft_wrap=True, markup=False)
    else:
        print_findings(findings, out)
    return EXIT_SLO if any(f.state == FOUND for f in findings) else EXIT_OK


def cmd_forensics(args: argparse.Namespace, out: Console, err: Console) -> int:
    """GPU-memory forensics over a result (and a PyTorch allocator snapshot)."""
    import json

    from mcp_bench.forensics.memory import MIB, Tolerance, allocator_fragmentation
    from mcp_bench.forensics.render import forensics_json, print_forensics
    from mcp_bench.forensics.sources import memory_forensics

    tol = Tolerance(absolute_bytes=args.tolerance_mib * MIB)
    report = memory_forensics(_load(args.file), tol)
    allocator = None
    if args.snapshot is not None:
        try:
            allocator = allocator_fragmentation(
                json.loads(Path(args.snapshot).read_text(encoding="utf-8")), tol
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UsageError(f"{args.snapshot}: not a memory snapshot as JSON: {exc}") from exc
    if args.json:
        out.print(forensics_json(report, allocator), highlight=False, soft_wrap=True, markup=False)
    else:
        print_forensics(report, allocator, out)
    states = [v["state"] for v in report.values()] + ([allocator["state"]] if allocator else [])
    if "Found" in states:
        return EXIT_SLO
    return EXIT_OK if any(s == "NotFound" for s in states) else EXIT_NOTHING


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-bench", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    # the flags of a run, shared by run and search
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
    run = sub.add_parser("run", parents=[flags], help="run a benchmark (exit 1 when an SLO is missed)")
    run.set_defaults(func=cmd_run)
    search = sub.add_parser(
        "search",
        parents=[flags],
        help="find the highest rate (or concurrency) that meets the SLO and the knee, by a bounded "
        "search from one --rate or --concurrency (exit 1 when no load met it)",
    )
    add_search_flags(search)
    search.set_defaults(func=cmd_run, search=True)

    merge = sub.add_parser("merge", help="merge shard results exactly (checksums verified)")
    merge.add_argument("files", nargs="+")
    merge.add_argument("--output", "-o", help="write the merged document (default: stdout)")
    merge.add_argument(
        "--min-overlap",
        type=float,
        default=MIN_OVERLAP,
        help="share of a level's time every shard must have run in for it to be a cluster-wide "
        "figure (default 0.9); a level below is flagged",
    )
    merge.add_argument("--csv")
    merge.add_argument("--quiet", "-q", action="store_true")
    merge.add_argument("--check", action="store_true", help="exit 1 when the merged SLO verdict fails")
    merge.set_defaults(func=cmd_merge)

    show = sub.add_parser("show", help="verify a result's checksum and print its table")
    show.add_argument("file")
    show.add_argument("--csv")
    show.add_argument("--check", action="store_true", help="exit 1 when the SLO verdict fails")
    show.set_defaults(func=cmd_show)

    plot = sub.add_parser("plot", help="verify a result's checksum and chart it as a PNG")
    plot.add_argument("file")
    plot.add_argument("--output", "-o", required=True, help="PNG to write")
    plot.set_defaults(func=cmd_plot)

    report = sub.add_parser(
        "report", help="verify a result's checksum and write one self-contained HTML report (and JUnit XML)"
    )
    report.add_argument("file")
    report.add_argument("--output", "-o", help="HTML to write (default: the result's name with .html)")
    report.add_argument("--junit", help="also write the SLO judgements as JUnit XML, for CI")
    report.add_argument("--check", action="store_true", help="exit 1 when the SLO verdict fails")
    report.set_defaults(func=cmd_report)

    diag = sub.add_parser(
        "diagnose", help="look for the twelve hidden latency traps (exit 1 when one is found)"
    )
    diag.add_argument("file", nargs="?", help="result document (checksum verified)")
    diag.add_argument("--trace", help="profiler trace, Chrome trace JSON (PyTorch profiler, Nsight Systems)")
    diag.add_argument("--ncu", help="Nsight Compute CSV export (ncu --csv --page raw or details)")
    diag.add_argument("--ncu-baseline", help="Nsight Compute CSV of a baseline to compare against")
    diag.add_argument("--compare", help="a second result of the same workload (other protocol or precision)")
    diag.add_argument(
        "--threshold", action="append", metavar="TRAP.NAME=VALUE", help="e.g. 3.queue_share=0.5"
    )
    diag.add_argument("--json", action="store_true", help="print the findings as JSON")
    diag.set_defaults(func=cmd_diagnose)

    fx = sub.add_parser(
        "forensics",
        help="GPU memory per level: peak, return to baseline, growth over repeats (exit 1 when found)",
    )
    fx.add_argument("file", help="result document (checksum verified)")
    fx.add_argument("--snapshot", help="PyTorch allocator snapshot as JSON (torch.cuda.memory_snapshot())")
    fx.add_argument(
        "--tolerance-mib", type=float, default=64.0, help="memory that may stay behind (default 64 MiB)"
    )
    fx.add_argument("--json", action="store_true", help="print the forensics as JSON")
    fx.set_defaults(func=cmd_forensics)
    add_sampler_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Console()
    if not out.is_terminal:
        out = Console(width=200)  # pods and pipes: never wrap the table
    err = Console(stderr=True, soft_wrap=True)  # an error line is never broken mid-message
    try:
        code: int = args.func(args, out, err)
    except (
        UsageError,
        PlanError,
        MergeError,
        UnknownBackendError,
        UnknownEngineError,
        ObserverArgError,
        ExternalEngineError,
    ) as exc:
        err.print(f"mcp-bench: error: {exc}", highlight=False, markup=False)
        return EXIT_USAGE
    return code


if __name__ == "__main__":
    sys.exit(main())
