"""The board of one object, pure: the object as the API returns it (``kubectl get -o json``) in,
a rich renderable out (its exit code: ``codes``).

An MCPReadiness: its verdict (``Evaluating`` while a round runs, with the last finished round's
verdict beside it), Ready, score, phase and stage; one row per KPI (a drill's board) and per
check (value, bound, verdict); the drill's stages (planned and achieved rate, P50/P99, errors,
where P99 jumped, state); its faults (injected, reverted, how long held, the recovery KPI).
An MCPBenchmark: its verdict, Ready, phase, shards, live progress, one row per level (the SLO
judgement is the level's verdict), the trap detectors' findings and the preflight's.

The status is read through its API model (``board.status``, tolerant of what it lacks); only
what it holds is shown, as it spells it; a figure it does not hold is ``-``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from ..api import benchmark, readiness
from ..api.common import Condition
from ..api.drill import FaultRecord, KpiRow, StageSummary
from ..api.readiness import CheckResult, MCPReadinessStatus
from ..api.results import LevelRow
from ..conditions import condition, parse_time
from .fit import Column, FittedTable
from .marks import NO_MARK, mark
from .status import Shown, held
from .status import benchmark as benchmark_status
from .status import readiness as readiness_status

EVALUATING = "Evaluating"
STYLES = {
    "Pass": "bold green",
    "Warn": "bold yellow",
    "Fail": "bold red",
    "Error": "bold red",
    "Inconclusive": "bold magenta",
    EVALUATING: "bold cyan",
    "True": "green",
    "False": "red",
    "Unknown": "cyan",
    "Reverted": "green",
    "Skipped": "dim",
    "RevertFailed": "bold red",
    "Injected": "yellow",
    "Planned": "yellow",
    "Done": "green",
    "Running": "cyan",
    "Stopped": "red",
}
NONE = "-"
KPI_HEADERS = ["KPI", "Value", "Bound", "Warn", "Verdict", "Evidence"]
CHECK_HEADERS = ["Check", "Value", "Bound", "Verdict", "Reason"]
STAGE_HEADERS = ["Stage", "State", "Planned", "Achieved", "P50", "P99", "P99 jump", "Errors", "Dropped"]
FAULT_HEADERS = ["Fault", "Kind", "Stage", "Target", "State", "Injected", "Reverted", "Held", "Recovery"]
WHOLE = frozenset({"Verdict", "State", "SLO"})  # columns of one verdict or state word: never wrapped
# columns of figures (key=value) or free text: where nothing else fits, their longest words fold
FOLDABLE = frozenset({"Value", "Bound", "Evidence", "Target", "Recovery", "Summary", "Message"})
FAULT_DROP = {"Stage": 1, "Held": 2, "Target": 3}
CELL = 80  # a figure or a bound longer than this is cut (the YAML has it whole)
MESSAGE = 240
Obj = Mapping[str, Any]


def _cut(text: str, limit: int = CELL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _styled(value: object) -> Text:
    text = NONE if value in (None, "") else str(value)
    return Text(text, style=STYLES.get(text, ""))


def _str(value: object) -> str:
    return NONE if value in (None, "") else str(value)


def _figures(values: Mapping[str, str], limit: int = CELL) -> str:
    return _cut(", ".join(f"{k}={v}" for k, v in values.items()), limit) or NONE


def _clock(value: object) -> str:
    """An RFC 3339 time as its time of day (UTC): the board is read within one run."""
    at = parse_time(value)
    return NONE if at is None else at.strftime("%H:%M:%S") + "Z"


def _held_for(start: object, end: object) -> str:
    began, ended = parse_time(start), parse_time(end)
    if began is None or end is None or ended is None:
        return NONE
    return f"{(ended - began).total_seconds():.1f} s"


def _table(
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[Text | str]],
    drop: Mapping[str, int] | None = None,
) -> FittedTable:
    """A table that fits the terminal without splitting a word; a verdict or a state is never
    wrapped, and the ``drop`` columns are left out, 1 first, where the rest would not fit
    (``board.fit``)."""
    columns = [Column(h, whole=h in WHOLE, fold=h in FOLDABLE, drop=(drop or {}).get(h, 0)) for h in headers]
    return FittedTable(title, columns, rows)


def _facts(*pairs: tuple[str, object]) -> Text:
    """``name value · name value`` with the value styled; pairs without a value are left out."""
    line = Text()
    for name, value in pairs:
        if value in (None, ""):
            continue
        if line:
            line.append(" · ", style="dim")
        line.append(f"{name} ", style="dim")
        line.append_text(value if isinstance(value, Text) else _styled(value))
    return line


def _title(obj: Shown[Any], kind: str, observed: int | None) -> Text:
    title = Text(f"{kind} {obj.namespace}/{obj.name}", style="bold")
    if obj.generation is not None:
        seen = "" if observed in (None, obj.generation) else f", status is of generation {observed}"
        title.append(f"  generation {obj.generation}{seen}", style="dim")
    return title


def _ready(conditions: list[Condition]) -> Text:
    ready = condition(conditions, "Ready")
    text = _styled(ready.status if ready else "Unknown")
    if ready is not None and ready.reason:
        text.append(f" ({ready.reason})")
    return text


def _message(conditions: list[Condition]) -> list[Text]:
    """Ready's message, where it has one."""
    ready = condition(conditions, "Ready")
    return [Text(_cut(ready.message, MESSAGE), style="dim")] if ready and ready.message else []


def shown_verdict(obj: Obj) -> str:
    """The verdict the board leads with: ``Evaluating`` while a round that made Ready Unknown
    runs (its status holds no verdict then), else the status's verdict, else its phase."""
    return _verdict(readiness_status(obj).status)


def _verdict(status: MCPReadinessStatus) -> str:
    ready = condition(status.conditions, "Ready")
    if ready is not None and ready.status == "Unknown" and not status.verdict:
        return EVALUATING
    return str(status.verdict or status.phase or "Pending")


# --- MCPReadiness ---


def _recoveries(kpis: Sequence[KpiRow], marks: bool = True) -> dict[str, str]:
    """The recovery KPI of each fault, by fault id (one recoverySeconds row per fault): its value
    and its mark (``marks.MARKS``, by its verdict), or without ``marks`` its verdict in words."""
    judged = {k.fault: k for k in kpis if k.name == "recoverySeconds" and k.fault}
    return {
        fault: f"{k.measured} {mark(k.verdict) if marks else k.verdict}".strip()
        for fault, k in judged.items()
    }


def kpi_rows(kpis: Sequence[KpiRow], limit: int = CELL, marks: bool = True) -> list[list[Text | str]]:
    """One row per KPI: name (and the fault it judges), value, bound, warn band, verdict, evidence;
    cells cut at ``limit`` characters; the verdict after its mark (``marks.MARKS``, by the verdict:
    a status may still hold emoji marks) where ``marks`` and it has one."""
    rows: list[list[Text | str]] = []
    for k in kpis:
        verdict, shown = _styled(k.verdict), mark(k.verdict)
        if marks and shown != NO_MARK:
            verdict = Text(f"{shown} ").append_text(verdict)
        rows.append(
            [
                k.name + (f" {k.fault}" if k.fault else ""),
                _cut(_str(k.measured), limit),
                _cut(_str(k.threshold), limit),
                _str(k.warn),
                verdict,
                _cut(_str(k.evidence), limit),
            ]
        )
    return rows


def check_rows(checks: Sequence[CheckResult], limit: int = CELL) -> list[list[Text | str]]:
    """The verdict table's rows, less a drill's KPI rows (``kpi:...``: the KPI table has them)."""
    return [
        [
            c.name,
            _figures(c.observed, limit),
            _figures(c.thresholds, limit),
            _styled(c.verdict),
            _str(c.reason),
        ]
        for c in checks
        if not c.name.startswith("kpi:")
    ]


def _ms(value: object) -> str:
    return NONE if value in (None, "") else f"{value} ms"


def stage_rows(stages: Sequence[StageSummary]) -> list[list[Text | str]]:
    return [
        [
            s.name,
            _styled(s.phase),
            _str(s.requested),
            NONE if not s.achieved_rps else f"{s.achieved_rps} req/s",
            _ms(s.p50_ms),
            _ms(s.p99_ms),
            NONE if s.p99_jump_at_seconds is None else f"at {s.p99_jump_at_seconds:g} s",
            _str(held(s, "errors")),
            _str(held(s, "dropped")),
        ]
        for s in stages
    ]


def fault_rows(
    faults: Sequence[FaultRecord], kpis: Sequence[KpiRow], limit: int = 48, marks: bool = True
) -> list[list[Text | str]]:
    """One row per journal entry: when it was injected and reverted, how long it was held, and
    the recovery KPI that judged it (with its mark, or without ``marks`` its verdict)."""
    recovery = _recoveries(kpis, marks)
    return [
        [
            f.id,
            f.kind,
            f.stage,
            _cut(_str(f.target), limit),
            _styled(f.phase),
            _clock(f.injected_at),
            _clock(f.reverted_at),
            _held_for(f.injected_at, f.reverted_at),
            recovery.get(f.id, NONE),
        ]
        for f in faults
    ]


def readiness_board(obj: Obj) -> RenderableType:
    shown = readiness_status(obj)
    status = shown.status
    verdict = _verdict(status)
    evaluating = verdict == EVALUATING
    last = status.history[-1].verdict if status.history and evaluating else None
    head = _facts(
        ("Verdict", verdict),
        ("last", last),
        ("Ready", _ready(status.conditions)),
        ("Score", None if status.score is None else f"{status.score} %"),
        ("Phase", status.phase),
        ("Stage", status.stage),
    )
    reverted = condition(status.conditions, "FaultsReverted")
    completed = status.completed_at if not evaluating else None  # the last round's, not this one's
    where = _facts(
        ("Target", status.target_url),
        ("release", status.release.revision if status.release else None),
        ("started", _clock(status.started_at) if status.started_at else None),
        ("completed", _clock(completed) if completed else None),
        ("faults reverted", reverted.status if reverted else None),
    )
    parts: list[RenderableType] = [
        _title(shown, readiness.KIND, status.observed_generation),
        head,
        *_message(status.conditions),
    ]
    if where:
        parts.append(where)
    if status.kpis:
        parts.append(_table("KPIs", KPI_HEADERS, kpi_rows(status.kpis)))
    checks = check_rows(status.checks)
    if checks:
        parts.append(_table("Checks", CHECK_HEADERS, checks))
    if status.stages:
        parts.append(_table("Stages", STAGE_HEADERS, stage_rows(status.stages)))
        bound = [f"{s.name}: {s.client_bound}" for s in status.stages if s.client_bound]
        parts.extend(Text(_cut(f"client bound in {b}", MESSAGE), style="yellow") for b in bound)
    if status.faults:
        # at 80 columns: the stage is in the fault's id, how long it held in its two times
        parts.append(_table("Faults", FAULT_HEADERS, fault_rows(status.faults, status.kpis), FAULT_DROP))
    if not (status.kpis or checks or status.stages or status.faults):
        parts.append(Text("no rows yet: nothing has been measured", style="dim"))
    return Group(*parts)


# --- MCPBenchmark ---


def level_rows(results: Sequence[LevelRow]) -> list[list[Text | str]]:
    return [
        [
            r.level,
            str(r.requests),
            str(r.errors),
            _str(r.throughput_rps),
            _ms(r.p50_ms),
            _ms(r.p99_ms),
            _styled(r.slo or None),
        ]
        for r in results
    ]


def benchmark_board(obj: Obj) -> RenderableType:
    shown = benchmark_status(obj)
    status = shown.status
    shards, progress = status.shards, status.progress
    reported = None
    if shards is not None:
        reported = f"{shards.reported}/{shards.expected}"
        if shards.rejected:
            reported = f"{reported} ({shards.rejected} rejected)"
    head = _facts(
        ("Verdict", status.verdict or status.phase or "Pending"),
        ("Ready", _ready(status.conditions)),
        ("Phase", status.phase),
        ("Shards", reported),
        ("P99", _ms(status.p99_ms) if status.p99_ms else None),
        ("Throughput", f"{status.throughput_rps} req/s" if status.throughput_rps else None),
    )
    parts: list[RenderableType] = [
        _title(shown, benchmark.KIND, status.observed_generation),
        head,
        *_message(status.conditions),
    ]
    if status.phase == "Running" and progress is not None:
        rate = held(progress, "rate_rps")
        parts.append(
            _facts(
                ("Level", progress.level),
                ("sent", held(progress, "sent")),
                ("errors", held(progress, "errors")),
                ("rate", f"{rate} req/s" if rate else None),
                ("ETA", None if progress.eta_seconds is None else f"{progress.eta_seconds} s"),
            )
        )
    parts.append(_facts(("Target", status.target_url), ("Job", status.job_name)))
    if status.results:
        headers = ["Level", "Requests", "Errors", "Throughput rps", "P50", "P99", "SLO"]
        parts.append(_table("Levels", headers, level_rows(status.results)))
    found = [d for d in status.diagnostics if d.state == "Found"]
    if found:
        rows = [[d.key, _str(d.level), _cut(_str(d.summary), 120)] for d in found]
        parts.append(_table("Traps found", ["Trap", "Level", "Summary"], rows))
    if status.preflight is not None and status.preflight.findings:
        rows = [[f.reason, _cut(_str(f.message), 120)] for f in status.preflight.findings]
        parts.append(_table("Preflight", ["Reason", "Message"], rows))
    return Group(*parts)


def board(obj: Obj) -> RenderableType:
    """The board of an MCPReadiness or an MCPBenchmark, by the object's kind."""
    return benchmark_board(obj) if obj.get("kind") == benchmark.KIND else readiness_board(obj)


def board_text(obj: Obj, width: int = 120) -> str:
    """The board as plain text (no colour), as a test or a log file reads it."""
    console = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    console.print(board(obj))
    return console.export_text()
