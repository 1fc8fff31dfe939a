"""``mcp-operator report NAME --kind mcpr``: an MCPReadiness's report as one HTML file: its
verdict and facts, a timeline of the drill (P99 and errors per stage over the stages' spans, the
stage bounds shaded, every fault marked from its injection to its revert, where P99 jumped), the
KPI board, the checks, the stages, the fault journal, the history and the conditions.
(``--kind mcpb``, the default, is ``benchmark.report``'s: the merged result document.)

Built from the object alone, as the API returns it, its status read through ``MCPReadinessStatus``
(``board.status``, tolerant of what it lacks): the same rows as ``kubectl mcp board``
(``board.render``), in the look of ``mcp-bench report`` (its page style, its ``Table``, its
inline PNG charts), so the file stands alone. The timeline lays the stages out as the plan
(``status.plan``) times them, draws P99 and errors window by window where the stage's status
holds its windows (per stage where an older operator wrote none), and each fault at its planned
offset for as long as the journal shows it held.

Needs the ``plot`` extra (Jinja2, matplotlib) to render, as ``mcp-bench report`` does; the JUnit
XML of its checks does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_bench.api import Table, write_pages

from .api.drill import FaultRecord, Stage, StageSummary
from .api.readiness import MCPReadinessStatus

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
from .board.status import Shown, held, readiness
from .conditions import condition, parse_time

if TYPE_CHECKING:  # matplotlib is the plot extra's: imported where a chart is drawn
    from matplotlib.figure import Figure

Obj = Mapping[str, Any]
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


def _length(stage: Stage) -> float:
    """How long a planned stage runs: its load, or its faults' holds when it has no load (as the
    drill times it), and a hold that outlasts the load."""
    holds = [f.at_seconds + f.hold_seconds for f in stage.faults]
    return max([stage.load.duration_seconds if stage.load is not None else 0.0, *holds])


def timeline(status: MCPReadinessStatus) -> Timeline | None:
    """The drill on one time axis from the plan and the journal; None for a gate without a drill
    (no ``status.plan``)."""
    if not status.plan:
        return None
    summaries = {s.name: s for s in status.stages}
    spans: list[StageSpan] = []
    offsets: dict[str, tuple[float, Stage]] = {}
    start = 0.0
    for stage in status.plan:
        end = start + _length(stage)
        row = summaries.get(stage.name)
        spans.append(_span(stage.name, row, start, end))
        offsets[stage.name] = (start, stage)
        start = end
    return Timeline(spans, [_fault_mark(entry, offsets) for entry in status.faults])


def _span(name: str, row: StageSummary | None, start: float, end: float) -> StageSpan:
    """A stage on the drill's axis, with the figures its summary holds (none before it ran)."""
    if row is None:
        return StageSpan(name, start, end, "Pending", None, None, None)
    jump = row.p99_jump_at_seconds
    return StageSpan(
        name=name,
        start_s=start,
        end_s=end,
        phase=row.phase,
        p99_ms=_number(row.p99_ms) if row.p99_ms else None,
        errors=held(row, "errors"),
        jump_s=None if jump is None else start + jump,
        windows=_window_points(row, start, end),
    )


def _window_points(row: StageSummary, start: float, end: float) -> tuple[WindowPoint, ...]:
    """A stage's windows on the drill's axis; each lasts until the next one (the last one until
    the stage's planned end)."""
    offsets = [start + w.offset_seconds for w in row.windows]
    return tuple(
        WindowPoint(
            start_s=at,
            end_s=offsets[i + 1] if i + 1 < len(offsets) else max(end, at),
            p99_ms=w.p99_ms,
            errors=w.errors,
        )
        for i, (at, w) in enumerate(zip(offsets, row.windows, strict=True))
    )


def _fault_mark(entry: FaultRecord, offsets: Mapping[str, tuple[float, Stage]]) -> FaultMark:
    """A journal entry on the axis: the drill names a fault ``<stage>-<index in the stage>``."""
    injected_s = reverted_s = None
    if entry.stage in offsets and entry.injected_at:
        start, planned = offsets[entry.stage]
        index = entry.id.removeprefix(f"{entry.stage}-")
        known = index.isdigit() and int(index) < len(planned.faults)
        injected_s = start + (planned.faults[int(index)].at_seconds if known else 0.0)
        began, ended = parse_time(entry.injected_at), parse_time(entry.reverted_at)
        if began is not None and ended is not None and entry.phase == "Reverted":
            reverted_s = injected_s + max(0.0, (ended - began).total_seconds())
    return FaultMark(entry.id, entry.kind, entry.stage, entry.phase, injected_s, reverted_s)


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


def _cells(*values: object) -> list[object]:
    """A row's cells, a value the status does not hold as an empty cell."""
    return ["" if v is None else v for v in values]


def facts(shown: Shown[MCPReadinessStatus]) -> list[tuple[str, str]]:
    status = shown.status
    ready = condition(status.conditions, "Ready")
    pairs = [
        ("Ready", f"{ready.status if ready else 'Unknown'} ({ready.reason if ready else ''})"),
        ("Why", ready.message if ready else ""),
        ("Score", "" if status.score is None else f"{status.score} %"),
        ("Phase", status.phase or ""),
        ("Stage", status.stage or ""),
        ("Target", status.target_url or ""),
        ("Release", (status.release.revision if status.release else None) or ""),
        ("Started", status.started_at or ""),
        ("Completed", status.completed_at or ""),
        ("Generation", f"{shown.generation} (status of {status.observed_generation})"),
        ("Evaluations", str(status.evaluations or "")),
    ]
    return [(name, fontless(value)) for name, value in pairs if value]


def tables(status: MCPReadinessStatus) -> list[Table]:
    out = [
        Table("kpis", KPI_HEADERS, _plain(kpi_rows(status.kpis, FULL, marks=False)), title="KPI board"),
        Table("checks", CHECK_HEADERS, _plain(check_rows(status.checks, FULL)), title="Checks"),
        Table("stages", STAGE_HEADERS, _plain(stage_rows(status.stages)), title="Stages"),
        Table(
            "faults",
            [*FAULT_HEADERS, "Message"],
            [
                [*row, fontless(entry.message)]
                for row, entry in zip(
                    _plain(fault_rows(status.faults, status.kpis, FULL, marks=False)),
                    status.faults,
                    strict=True,
                )
            ],
            title="Faults",
        ),
        Table(
            "history",
            ["Completed", "Verdict", "Score", "Reason", "Trigger", "Revision"],
            _plain(
                [
                    _cells(h.completed_at, h.verdict, h.score, h.reason, h.trigger, h.revision)
                    for h in status.history
                ]
            ),
            title="History",
        ),
        Table(
            "conditions",
            ["Type", "Status", "Reason", "Message", "Since"],
            _plain(
                [
                    _cells(c.type, c.status, c.reason, c.message, c.last_transition_time)
                    for c in status.conditions
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

    shown = readiness(obj)
    line = timeline(shown.status)
    style = BENCH_PAGE[BENCH_PAGE.index("<style>") : BENCH_PAGE.index("</style>") + len("</style>")]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)
    return env.from_string(PAGE).render(
        title=f"MCPReadiness {shown.namespace}/{shown.name}",
        style=style,
        verdict=shown_verdict(obj),
        facts=facts(shown),
        chart=None if line is None else timeline_chart(line),
        note=TIMELINE_NOTE + (FAULTS_NOTE if line is not None and line.placed_faults else ""),
        tables=tables(shown.status),
        marks=MARKS,
    )


def write_readiness_report(obj: Obj, html: Path, junit: Path | None = None) -> list[Path]:
    """Write the HTML report of an MCPReadiness and, with ``junit``, its check rows as JUnit XML
    (as ``mcp-check --junit`` writes them); only the JUnit XML when the ``plot`` extra is missing."""
    from mcp_checks.api import ReadinessObject, write_junit

    outcomes = ReadinessObject.read(obj).status.outcomes()
    return write_pages(
        lambda: render_readiness_html(obj), html, junit, lambda path: write_junit(outcomes, path)
    )
