"""The board of one object, pure: the object as the API returns it (``kubectl get -o json``) in,
a rich renderable out (its exit code: ``codes``).

An MCPReadiness: its verdict (``Evaluating`` while a round runs, with the last finished round's
verdict beside it), Ready, score, phase and stage; one row per KPI (a drill's board) and per
check (value, bound, verdict); the drill's stages (planned and achieved rate, P50/P99, errors,
where P99 jumped, state); its faults (injected, reverted, how long held, the recovery KPI).
An MCPBenchmark: its verdict, Ready, phase, shards, live progress, one row per level (the SLO
judgement is the level's verdict), the trap detectors' findings and the preflight's.

Only what the status holds is shown, as it spells it; a figure it does not hold is ``-``.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from ..api import benchmark, readiness
from .fit import Column, FittedTable
from .marks import NO_MARK, mark

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


def _condition(status: Obj, kind: str) -> Obj:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def _figures(values: Mapping[str, Any] | None, limit: int = CELL) -> str:
    return _cut(", ".join(f"{k}={v}" for k, v in (values or {}).items()), limit) or NONE


def _time(value: object) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _clock(value: object) -> str:
    """An RFC 3339 time as its time of day (UTC): the board is read within one run."""
    at = _time(value)
    return NONE if at is None else at.strftime("%H:%M:%S") + "Z"


def _held(start: object, end: object) -> str:
    began, ended = _time(start), _time(end)
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


def _title(obj: Obj, kind: str) -> Text:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    title = Text(f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}", style="bold")
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if generation is not None:
        seen = "" if observed in (None, generation) else f", status is of generation {observed}"
        title.append(f"  generation {generation}{seen}", style="dim")
    return title


def _ready(status: Obj) -> Text:
    ready = _condition(status, "Ready")
    text = _styled(ready.get("status") or "Unknown")
    if ready.get("reason"):
        text.append(f" ({ready['reason']})")
    return text


def shown_verdict(obj: Obj) -> str:
    """The verdict the board leads with: ``Evaluating`` while a round that made Ready Unknown
    runs (its status holds no verdict then), else the status's verdict, else its phase."""
    status = obj.get("status") or {}
    if _condition(status, "Ready").get("status") == "Unknown" and not status.get("verdict"):
        return EVALUATING
    return str(status.get("verdict") or status.get("phase") or "Pending")


# --- MCPReadiness ---


def _recoveries(kpis: Sequence[Obj], marks: bool = True) -> dict[str, str]:
    """The recovery KPI of each fault, by fault id (one recoverySeconds row per fault): its value
    and its mark (``marks.MARKS``, by its verdict), or without ``marks`` its verdict in words."""
    judged = {str(k["fault"]): k for k in kpis if k.get("name") == "recoverySeconds" and k.get("fault")}
    return {
        fault: f"{k.get('measured', '')} {mark(k.get('verdict')) if marks else k.get('verdict', '')}".strip()
        for fault, k in judged.items()
    }


def kpi_rows(kpis: Sequence[Obj], limit: int = CELL, marks: bool = True) -> list[list[Text | str]]:
    """One row per KPI: name (and the fault it judges), value, bound, warn band, verdict, evidence;
    cells cut at ``limit`` characters; the verdict after its mark (``marks.MARKS``, by the verdict:
    a status may still hold emoji marks) where ``marks`` and it has one."""
    rows: list[list[Text | str]] = []
    for k in kpis:
        name = str(k.get("name", "")) + (f" {k['fault']}" if k.get("fault") else "")
        verdict, shown = _styled(k.get("verdict")), mark(k.get("verdict"))
        if marks and shown != NO_MARK:
            verdict = Text(f"{shown} ").append_text(verdict)
        rows.append(
            [
                name,
                _cut(_str(k.get("measured")), limit),
                _cut(_str(k.get("threshold")), limit),
                _str(k.get("warn")),
                verdict,
                _cut(_str(k.get("evidence")), limit),
            ]
        )
    return rows


def check_rows(checks: Sequence[Obj], limit: int = CELL) -> list[list[Text | str]]:
    """The verdict table's rows, less a drill's KPI rows (``kpi:...``: the KPI table has them)."""
    return [
        [
            str(c.get("name", "")),
            _figures(c.get("observed"), limit),
            _figures(c.get("thresholds"), limit),
            _styled(c.get("verdict")),
            _str(c.get("reason")),
        ]
        for c in checks
        if not str(c.get("name", "")).startswith("kpi:")
    ]


def _ms(value: object) -> str:
    return NONE if value in (None, "") else f"{value} ms"


def stage_rows(stages: Sequence[Obj]) -> list[list[Text | str]]:
    rows: list[list[Text | str]] = []
    for s in stages:
        achieved = s.get("achievedRps")
        jump = s.get("p99JumpAtSeconds")
        rows.append(
            [
                str(s.get("name", "")),
                _styled(s.get("phase")),
                _str(s.get("requested")),
                NONE if achieved in (None, "") else f"{achieved} req/s",
                _ms(s.get("p50Ms")),
                _ms(s.get("p99Ms")),
                NONE if jump is None else f"at {jump:g} s",
                _str(s.get("errors")),
                _str(s.get("dropped")),
            ]
        )
    return rows


def fault_rows(
    faults: Sequence[Obj], kpis: Sequence[Obj], limit: int = 48, marks: bool = True
) -> list[list[Text | str]]:
    """One row per journal entry: when it was injected and reverted, how long it was held, and
    the recovery KPI that judged it (with its mark, or without ``marks`` its verdict)."""
    recovery = _recoveries(kpis, marks)
    return [
        [
            str(f.get("id", "")),
            str(f.get("kind", "")),
            str(f.get("stage", "")),
            _cut(_str(f.get("target")), limit),
            _styled(f.get("phase")),
            _clock(f.get("injectedAt")),
            _clock(f.get("revertedAt")),
            _held(f.get("injectedAt"), f.get("revertedAt")),
            recovery.get(str(f.get("id")), NONE),
        ]
        for f in faults
    ]


def readiness_board(obj: Obj) -> RenderableType:
    status = obj.get("status") or {}
    verdict = shown_verdict(obj)
    history = status.get("history") or []
    evaluating = verdict == EVALUATING
    last = history[-1].get("verdict") if history and evaluating else None
    score = status.get("score")
    head = _facts(
        ("Verdict", verdict),
        ("last", last),
        ("Ready", _ready(status)),
        ("Score", None if score is None else f"{score} %"),
        ("Phase", status.get("phase")),
        ("Stage", status.get("stage")),
    )
    release = status.get("release") or {}
    reverted = _condition(status, "FaultsReverted")
    completed = status.get("completedAt") if not evaluating else None  # the last round's, not this one's
    where = _facts(
        ("Target", status.get("targetUrl")),
        ("release", release.get("revision")),
        ("started", _clock(status.get("startedAt")) if status.get("startedAt") else None),
        ("completed", _clock(completed) if completed else None),
        ("faults reverted", reverted.get("status")),
    )
    parts: list[RenderableType] = [_title(obj, readiness.KIND), head]
    message = str(_condition(status, "Ready").get("message") or "")
    if message:
        parts.append(Text(_cut(message, MESSAGE), style="dim"))
    if where:
        parts.append(where)
    kpis = list(status.get("kpis") or [])
    if kpis:
        parts.append(_table("KPIs", KPI_HEADERS, kpi_rows(kpis)))
    checks = check_rows(list(status.get("checks") or []))
    if checks:
        parts.append(_table("Checks", CHECK_HEADERS, checks))
    stages = list(status.get("stages") or [])
    if stages:
        parts.append(_table("Stages", STAGE_HEADERS, stage_rows(stages)))
        bound = [f"{s.get('name')}: {s['clientBound']}" for s in stages if s.get("clientBound")]
        parts.extend(Text(_cut(f"client bound in {b}", MESSAGE), style="yellow") for b in bound)
    faults = list(status.get("faults") or [])
    if faults:
        # at 80 columns: the stage is in the fault's id, how long it held in its two times
        parts.append(_table("Faults", FAULT_HEADERS, fault_rows(faults, kpis), FAULT_DROP))
    if not (kpis or checks or stages or faults):
        parts.append(Text("no rows yet: nothing has been measured", style="dim"))
    return Group(*parts)


# --- MCPBenchmark ---


def level_rows(results: Sequence[Obj]) -> list[list[Text | str]]:
    return [
        [
            str(r.get("level", "")),
            str(r.get("requests", "")),
            str(r.get("errors", "")),
            _str(r.get("throughputRps")),
            _ms(r.get("p50Ms")),
            _ms(r.get("p99Ms")),
            _styled(r.get("slo") or None),
        ]
        for r in results
    ]


def benchmark_board(obj: Obj) -> RenderableType:
    status = obj.get("status") or {}
    shards = status.get("shards") or {}
    progress = status.get("progress") or {}
    reported = f"{shards.get('reported', 0)}/{shards.get('expected')}" if shards else None
    if shards.get("rejected"):
        reported = f"{reported} ({shards['rejected']} rejected)"
    head = _facts(
        ("Verdict", status.get("verdict") or status.get("phase") or "Pending"),
        ("Ready", _ready(status)),
        ("Phase", status.get("phase")),
        ("Shards", reported),
        ("P99", _ms(status.get("p99Ms")) if status.get("p99Ms") else None),
        ("Throughput", f"{status['throughputRps']} req/s" if status.get("throughputRps") else None),
    )
    parts: list[RenderableType] = [_title(obj, benchmark.KIND), head]
    message = str(_condition(status, "Ready").get("message") or "")
    if message:
        parts.append(Text(_cut(message, MESSAGE), style="dim"))
    if status.get("phase") == "Running" and progress:
        eta = progress.get("etaSeconds")
        parts.append(
            _facts(
                ("Level", progress.get("level")),
                ("sent", progress.get("sent")),
                ("errors", progress.get("errors")),
                ("rate", f"{progress.get('rateRps')} req/s" if progress.get("rateRps") else None),
                ("ETA", None if eta is None else f"{eta} s"),
            )
        )
    parts.append(_facts(("Target", status.get("targetUrl")), ("Job", status.get("jobName"))))
    results = list(status.get("results") or [])
    if results:
        headers = ["Level", "Requests", "Errors", "Throughput rps", "P50", "P99", "SLO"]
        parts.append(_table("Levels", headers, level_rows(results)))
    found = [d for d in status.get("diagnostics") or [] if d.get("state") == "Found"]
    if found:
        rows = [
            [str(d.get("key", "")), _str(d.get("level")), _cut(_str(d.get("summary")), 120)] for d in found
        ]
        parts.append(_table("Traps found", ["Trap", "Level", "Summary"], rows))
    preflight = (status.get("preflight") or {}).get("findings") or []
    if preflight:
        rows = [[str(f.get("reason", "")), _cut(_str(f.get("message")), 120)] for f in preflight]
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
