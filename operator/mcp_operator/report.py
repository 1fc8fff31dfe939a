"""``mcp-operator report NAME --kind mcpr``: an MCPReadiness's report as one HTML file: its
verdict and facts, a timeline of the drill (P99 and errors per stage over the stages' spans, the
stage bounds shaded, every fault marked from its injection to its revert, where P99 jumped), the
KPI board, the checks, the stages, the fault journal, the history and the conditions.
(``--kind mcpb``, the default, is ``benchmark.report``'s: the merged result document.)

Built from the object alone, as the API returns it: the same rows as ``kubectl mcp board``
(``board.render``), in the look of ``mcp-bench report`` (its page style, its ``Table``, its
inline PNG charts), so the file stands alone. The timeline lays the stages out as the plan
(``status.plan``) times them, draws P99 and errors window by window where the stage's status
holds its windows (per stage where an older operator wrote none), and each fault at its planned
offset for as long as the journal shows it held.

Needs the ``plot`` extra (Jinja2, matplotlib) to render, as ``mcp-bench report`` does; the JUnit
XML of its checks does not.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_bench.api import Table, write_pages

# the page needs no emoji font: a verdict mark spelt as its word (its colour drawn by CSS)
from .board.marks import fontless
from .board.render import (
    CHECK_HEADERS,
    FAULT_HEADERS,
    KPI_HEADERS,
    STAGE_HEADERS,
    check_rows,
    fault_rows,
    kpi_rows,
    shown_verdict,
    stage_rows,
)

if TYPE_CHECKING:  # matplotlib is the plot extra's: imported where a chart is drawn
    from matplotlib.figure import Figure

Obj = Mapping[str, Any]
HISTORY_KEYS = ("completedAt", "verdict", "score", "reason", "trigger", "revision")
FULL = 1_000_000  # no cell is cut in the HTML
TIMELINE_NOTE = (
    "Stage bounds are the plan's (each stage's start and end times are in the stage table); P99 "
    "and errors are per window of the stage's load (per stage where the status holds no windows), "
    "a stage's P99 jump is marked where it was found."
)
FAULTS_NOTE = (
    " A fault is drawn from its planned offset in its stage for as long as the journal shows it held."
)


@dataclass(frozen=True)
class WindowPoint:
    start_s: float  # from the drill's start
    end_s: float
    p99_ms: float | None
    errors: int


@dataclass(frozen=True)
class StageSpan:
    name: str
    start_s: float
    end_s: float
    phase: str
    p99_ms: float | None
    errors: int | None
    jump_s: float | None  # where P99 first jumped, from the drill's start
    windows: tuple[WindowPoint, ...] = ()


@dataclass(frozen=True)
class FaultMark:
    id: str
    kind: str
    stage: str
    phase: str
    injected_s: float | None  # from the drill's start; None: never injected
    reverted_s: float | None  # None: not reverted (still open, or its revert failed)


@dataclass(frozen=True)
class Timeline:
    stages: list[StageSpan]
    faults: list[FaultMark]

    @property
    def end_s(self) -> float:
        return max((s.end_s for s in self.stages), default=0.0)

    @property
    def placed_faults(self) -> list[FaultMark]:
        """The faults drawn: those injected (a fault never injected has no place on the axis)."""
        return [f for f in self.faults if f.injected_s is not None]


def _number(value: object) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None


def _time(value: object) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _length(stage: Obj) -> float:
    """How long a planned stage runs: its load, or its faults' holds when it has no load (as the
    drill times it), and a hold that outlasts the load."""
    load = stage.get("load") or {}
    faults = stage.get("faults") or []
    holds = [float(f.get("atSeconds") or 0) + float(f.get("holdSeconds") or 0) for f in faults]
    return max([float(load.get("durationSeconds") or 0), *holds])


def timeline(status: Obj) -> Timeline | None:
    """The drill on one time axis from the plan and the journal; None for a gate without a drill
    (no ``status.plan``)."""
    plan = list(status.get("plan") or [])
    if not plan:
        return None
    summaries = {str(s.get("name")): s for s in status.get("stages") or []}
    spans: list[StageSpan] = []
    offsets: dict[str, tuple[float, Obj]] = {}
    start = 0.0
    for stage in plan:
        name = str(stage.get("name"))
        end = start + _length(stage)
        row = summaries.get(name) or {}
        jump = row.get("p99JumpAtSeconds")
        spans.append(
            StageSpan(
                name=name,
                start_s=start,
                end_s=end,
                phase=str(row.get("phase") or "Pending"),
                p99_ms=_number(row.get("p99Ms")) if row.get("p99Ms") else None,
                errors=int(row["errors"]) if row.get("errors") is not None else None,
                jump_s=None if jump is None else start + float(jump),
                windows=_window_points(row, start, end),
            )
        )
        offsets[name] = (start, stage)
        start = end
    return Timeline(spans, [_fault_mark(entry, offsets) for entry in status.get("faults") or []])


def _window_points(row: Obj, start: float, end: float) -> tuple[WindowPoint, ...]:
    """A stage's windows on the drill's axis; each lasts until the next one (the last one until
    the stage's planned end)."""
    windows = [w for w in row.get("windows") or [] if _number(w.get("offsetSeconds")) is not None]
    offsets = [start + float(w["offsetSeconds"]) for w in windows]
    return tuple(
        WindowPoint(
            start_s=at,
            end_s=offsets[i + 1] if i + 1 < len(offsets) else max(end, at),
            p99_ms=_number(w.get("p99Ms")) if w.get("p99Ms") is not None else None,
            errors=int(w.get("errors") or 0),
        )
        for i, (at, w) in enumerate(zip(offsets, windows, strict=True))
    )


def _fault_mark(entry: Obj, offsets: Mapping[str, tuple[float, Obj]]) -> FaultMark:
    """A journal entry on the axis: the drill names a fault ``<stage>-<index in the stage>``."""
    stage = str(entry.get("stage"))
    fault_id = str(entry.get("id"))
    injected_s = reverted_s = None
    if stage in offsets and entry.get("injectedAt"):
        start, planned = offsets[stage]
        index = fault_id.removeprefix(f"{stage}-")
        faults = list(planned.get("faults") or [])
        known = index.isdigit() and int(index) < len(faults)
        injected_s = start + (float(faults[int(index)].get("atSeconds") or 0) if known else 0.0)
        began, ended = _time(entry.get("injectedAt")), _time(entry.get("revertedAt"))
        if began is not None and ended is not None and entry.get("phase") == "Reverted":
            reverted_s = injected_s + max(0.0, (ended - began).total_seconds())
    return FaultMark(fault_id, str(entry.get("kind")), stage, str(entry.get("phase")), injected_s, reverted_s)


def _draw_windows(p99: Any, errors: Any, windows: Sequence[WindowPoint]) -> None:
    """P99 as a step per window (a gap where a window completed nothing) and errors as bars."""
    for w in windows:
        if w.p99_ms is not None:
            p99.hlines(w.p99_ms, w.start_s, w.end_s, color="tab:blue", linewidth=2, label="P99 per window")
        if w.errors:
            errors.bar(
                w.start_s, w.errors, width=w.end_s - w.start_s, align="edge", color="tab:red", alpha=0.6
            )


def timeline_chart(line: Timeline) -> str | None:
    """The timeline as an inline PNG; None where there is nothing to draw."""
    from mcp_bench.api import data_uri

    fig = timeline_figure(line)
    return None if fig is None else data_uri(fig)


def timeline_figure(line: Timeline) -> Figure | None:
    """P99 and errors per window (or per stage) over the drill, stage bounds shaded, faults
    marked (and named in the legend only where the drill had some); the caller closes it."""
    import matplotlib.pyplot as plt

    if not line.stages or line.end_s <= 0:
        return None
    fig, (p99, errors) = plt.subplots(2, 1, figsize=(10, 5), sharex=True, height_ratios=(3, 2))
    for i, span in enumerate(line.stages):
        for ax in (p99, errors):
            ax.axvspan(span.start_s, span.end_s, color="#e8eef6" if i % 2 == 0 else "#f6f8fb", zorder=0)
        p99.text(
            (span.start_s + span.end_s) / 2,
            1.01,
            span.name,
            ha="center",
            va="bottom",
            transform=p99.get_xaxis_transform(),
            fontsize="small",
        )
        if span.windows:
            _draw_windows(p99, errors, span.windows)
        elif span.p99_ms is not None:
            p99.hlines(
                span.p99_ms,
                span.start_s,
                span.end_s,
                color="tab:blue",
                linewidth=2.5,
                label="P99 of the stage" if i == 0 else None,
            )
        if span.errors and not span.windows:
            errors.bar(
                span.start_s,
                span.errors,
                width=span.end_s - span.start_s,
                align="edge",
                color="tab:red",
                alpha=0.6,
            )
        if span.jump_s is not None:
            p99.axvline(span.jump_s, color="tab:orange", linestyle=":", label="P99 jump")
    for fault in line.faults:
        if fault.injected_s is None:
            continue
        until = fault.reverted_s if fault.reverted_s is not None else line.end_s
        for ax in (p99, errors):
            # labelled on the P99 axis only: the legend names the faults where there are some
            held = ax.axvspan(fault.injected_s, until, color="tab:red", alpha=0.12, zorder=1)
            ax.axvline(fault.injected_s, color="tab:red", linewidth=1)
            if ax is p99:
                held.set_label("fault held (injected: red line)")
            if fault.reverted_s is not None:
                reverted = ax.axvline(fault.reverted_s, color="tab:green", linewidth=1, linestyle="--")
                if ax is p99:
                    reverted.set_label("fault reverted")
        p99.annotate(
            f"{fault.kind} {fault.id}",
            (fault.injected_s, 0.95),
            xycoords=p99.get_xaxis_transform(),
            fontsize="x-small",
            color="tab:red",
            rotation=90,
            va="top",
            ha="right",
        )
    p99.set_ylabel("P99 ms")
    p99.set_ylim(bottom=0)
    p99.grid(alpha=0.3)
    handles, labels = p99.get_legend_handles_labels()
    if handles:
        unique = dict(zip(labels, handles, strict=True))
        p99.legend(unique.values(), unique.keys(), fontsize="small", loc="upper left")
    errors.set_ylabel("errors")
    errors.set_ylim(bottom=0)
    errors.set_xlabel("seconds from the drill's start (planned stage bounds)")
    errors.grid(alpha=0.3)
    fig.suptitle("drill timeline" if line.placed_faults else "drill timeline (no faults)", y=0.995)
    fig.tight_layout()
    return fig


def _plain(rows: Sequence[Sequence[object]]) -> list[list[str]]:
    """The board's rows as text (a rich Text cell by its plain string), without emoji."""
    return [[fontless(str(getattr(cell, "plain", cell))) for cell in row] for row in rows]


def facts(obj: Obj) -> list[tuple[str, str]]:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    ready: Obj = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    release = status.get("release") or {}
    pairs = [
        ("Ready", f"{ready.get('status', 'Unknown')} ({ready.get('reason', '')})"),
        ("Why", str(ready.get("message") or "")),
        ("Score", "" if status.get("score") is None else f"{status['score']} %"),
        ("Phase", str(status.get("phase") or "")),
        ("Stage", str(status.get("stage") or "")),
        ("Target", str(status.get("targetUrl") or "")),
        ("Release", str(release.get("revision") or "")),
        ("Started", str(status.get("startedAt") or "")),
        ("Completed", str(status.get("completedAt") or "")),
        ("Generation", f"{meta.get('generation')} (status of {status.get('observedGeneration')})"),
        ("Evaluations", str(status.get("evaluations") or "")),
    ]
    return [(name, fontless(value)) for name, value in pairs if value]


def tables(obj: Obj) -> list[Table]:
    status = obj.get("status") or {}
    kpis = list(status.get("kpis") or [])
    out = [
        Table("kpis", KPI_HEADERS, _plain(kpi_rows(kpis, FULL, marks=False)), title="KPI board"),
        Table("checks", CHECK_HEADERS, _plain(check_rows(status.get("checks") or [], FULL)), title="Checks"),
        Table("stages", STAGE_HEADERS, _plain(stage_rows(status.get("stages") or [])), title="Stages"),
        Table(
            "faults",
            [*FAULT_HEADERS, "Message"],
            [
                [*row, fontless(str(entry.get("message") or ""))]
                for row, entry in zip(
                    _plain(fault_rows(status.get("faults") or [], kpis, FULL, marks=False)),
                    status.get("faults") or [],
                    strict=True,
                )
            ],
            title="Faults",
        ),
        Table(
            "history",
            ["Completed", "Verdict", "Score", "Reason", "Trigger", "Revision"],
            _plain([[h.get(k, "") for k in HISTORY_KEYS] for h in status.get("history") or []]),
            title="History",
        ),
        Table(
            "conditions",
            ["Type", "Status", "Reason", "Message", "Since"],
            _plain(
                [
                    [c.get(k, "") for k in ("type", "status", "reason", "message", "lastTransitionTime")]
                    for c in status.get("conditions") or []
                ]
            ),
            title="Conditions",
        ),
    ]
    return [t for t in out if t.rows]


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{ title }}</title>
{{ style | safe }}
<style>
.Warn { background: #fff3cd; } .Error, .RevertFailed { background: #fbe0e0; }
.Inconclusive, .Evaluating { background: #e8e0fb; } .Reverted { background: #dff3e0; }
td.Warn::before, .verdict.Warn::before { background: #b8860b; }
td.Error::before, td.RevertFailed::before, .verdict.Error::before { background: #c62828; }
td.Inconclusive::before, .verdict.Inconclusive::before { background: #6a3fb5; }
td.Reverted::before { background: #2e7d32; }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p><span id="verdict" class="verdict {{ verdict }}">{{ verdict }}</span></p>
<dl id="facts">
{% for name, value in facts %}<dt>{{ name }}</dt><dd>{{ value }}</dd>
{% endfor %}</dl>
{% if chart %}
<h2>Timeline</h2>
<img id="chart-timeline" alt="P99 and errors per stage, stage bounds and faults over the drill"
 src="{{ chart }}">
<p class="note" id="timeline-note">{{ note }}</p>
{% endif %}
{% for t in tables %}
<h2>{{ t.title }}</h2>
<table id="{{ t.id }}" class="text">
<thead><tr>{% for h in t.headers %}<th>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>
{% for row in t.rows %}<tr>
{%- for cell in row %}{% set words = cell.split() %}{% set word = words[-1] if 0 < words|length < 3 else "" %}
<td{% if word in marks %} class="{{ word }}"{% endif %}>{{ cell }}</td>
{%- endfor %}</tr>
{% endfor %}</tbody>
</table>
{% endfor %}
</body>
</html>
"""
MARKS = ("Pass", "Warn", "Fail", "Error", "Inconclusive", "Reverted", "RevertFailed")


def render_readiness_html(obj: Obj) -> str:
    """The report of an MCPReadiness as one HTML page (Jinja2 and matplotlib: the ``plot`` extra)."""
    import jinja2

    from mcp_bench.api import PAGE as BENCH_PAGE

    meta = obj.get("metadata") or {}
    line = timeline(obj.get("status") or {})
    style = BENCH_PAGE[BENCH_PAGE.index("<style>") : BENCH_PAGE.index("</style>") + len("</style>")]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)
    return env.from_string(PAGE).render(
        title=f"MCPReadiness {meta.get('namespace', '')}/{meta.get('name', '')}",
        style=style,
        verdict=shown_verdict(obj),
        facts=facts(obj),
        chart=None if line is None else timeline_chart(line),
        note=TIMELINE_NOTE + (FAULTS_NOTE if line is not None and line.placed_faults else ""),
        tables=tables(obj),
        marks=MARKS,
    )


def write_readiness_report(obj: Obj, html: Path, junit: Path | None = None) -> list[Path]:
    """Write the HTML report of an MCPReadiness and, with ``junit``, its check rows as JUnit XML
    (as ``mcp-check --junit`` writes them); only the JUnit XML when the ``plot`` extra is missing."""
    from mcp_checks.api import row_outcome, write_junit

    outcomes = [row_outcome(r) for r in (obj.get("status") or {}).get("checks") or []]
    return write_pages(
        lambda: render_readiness_html(obj), html, junit, lambda path: write_junit(outcomes, path)
    )
