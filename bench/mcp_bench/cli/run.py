"""``mcp-bench run`` and ``mcp-bench search``: run a plan (with a progress bar on a terminal),
write its result, print its table or one summary line, and exit by its SLO verdict."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from mcp_bench.cli.common import EXIT_NOTHING, UsageError, exit_code, write_outputs
from mcp_bench.cli.runflags import parse_duration_s, plan_from_args, run_flags, with_timeline_interval
from mcp_bench.cli_observers import build_observers
from mcp_bench.engines import RunObserver, run_plan_sync
from mcp_bench.engines.gate import StartAtGate, parse_start_at
from mcp_bench.plan import RunPlan
from mcp_bench.report import print_report
from mcp_bench.results import ResultDocument
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult
from mcp_bench.search.cli import add_search_flags, print_search, with_search
from mcp_bench.search.rows import search_line


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
    write_outputs(doc, args.output, args.csv)
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


def add_run_commands(sub: Any) -> None:
    """``run`` and ``search``, registered on the CLI's subcommands."""
    flags = run_flags()
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
