"""A stage's row in ``status.stages`` (``StageSummary``), built through the API model from the
stage and its figures: what it asked for, what it achieved, its windows (the first
``MAX_WINDOWS``; the stage's totals stay whole). A row holds only what is known (a stage not run
yet has no figures), so it is written without the model's defaults (``wire``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from mcp_common.tolerant import tolerant

from ...api.drill import MAX_WINDOWS, Stage, StageClassSummary, StageSummary, WindowSummary
from .load import StageFigures
from .stageplan import requested

Phase = Literal["Pending", "Running", "Done", "Skipped", "Stopped"]
AFTER_AN_EARLY_END: dict[str, Phase] = {"Running": "Stopped", "Pending": "Skipped"}
MAX_CLIENT_BOUND = 1024


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _known(**fields: Any) -> dict[str, Any]:
    """The fields that have a value: one left out is not written (no null, no default)."""
    return {name: value for name, value in fields.items() if value is not None}


def window_rows(figures: StageFigures) -> list[WindowSummary]:
    """The stage's windows for status (the first ``MAX_WINDOWS``; the stage's totals stay whole)."""
    return [
        WindowSummary(
            offset_seconds=round(w.offset_s, 3),
            p99_ms=None if w.p99_ms is None else round(w.p99_ms, 3),
            completed=w.completed,
            errors=w.errors,
            dropped=w.dropped,
        )
        for w in figures.windows[:MAX_WINDOWS]
    ]


def stage_summary(
    stage: Stage,
    phase: Phase,
    figures: StageFigures | None = None,
    *,
    started_at: str | None = None,
    ended_at: str | None = None,
) -> StageSummary:
    """The stage's row: its load asked for, and once it ran, its figures."""
    return StageSummary(
        name=stage.name,
        phase=phase,
        **_known(
            started_at=started_at,
            ended_at=ended_at,
            requested=None if stage.load is None else requested(stage.load),
        ),
        **({} if figures is None else _figures(figures)),
    )


def _figures(figures: StageFigures) -> dict[str, Any]:
    classes = [
        StageClassSummary(
            name=c.name, completed=c.completed, errors=c.errors, p50_ms=_ms(c.p50_ms), p99_ms=_ms(c.p99_ms)
        )
        for c in figures.classes
    ]
    return _known(
        achieved_rps="" if figures.achieved_rps is None else f"{figures.achieved_rps:.1f}",
        p50_ms=_ms(figures.p50_ms),
        p99_ms=_ms(figures.p99_ms),
        errors=figures.errors,
        dropped=figures.dropped,
        client_bound="; ".join(figures.client_bound)[:MAX_CLIENT_BOUND] or None,
        load_from=figures.source or None,
        classes=classes or None,
        windows=window_rows(figures) or None,
    )


def wire(row: StageSummary) -> dict[str, Any]:
    """The row as status holds it: the fields it was given, nothing else."""
    return row.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")


def ended(rows: Sequence[StageSummary]) -> list[StageSummary]:
    """A drill that ended early (aborted, or its operator lost): no stage stays Running or
    Pending for ever; the one running is Stopped, those not reached are Skipped."""
    out = []
    for row in rows:
        row = row.model_copy()
        row.phase = AFTER_AN_EARLY_END.get(row.phase, row.phase)
        out.append(row)
    return out


def ended_stages(stages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``ended`` of the rows a status holds (as read from the API, maybe by an older or newer
    operator): each row as it was, its phase ended; a row whose phase the model does not know
    is neither Running nor Pending, and stays as it is."""
    out = []
    for row in stages:
        try:
            (summary,) = ended([tolerant(StageSummary, row)])
        except ValidationError:
            out.append(dict(row))
            continue
        out.append({**row, **wire(summary)})
    return out
