"""A stage's row in ``status.stages``, built through ``StageSummary``: only what is known is
written (a stage not run yet has no figures, and no field is null), and the model reads back
what was written."""

from __future__ import annotations

from dataclasses import replace

from mcp_operator.api.drill import Stage, StageLoad, StageSummary
from mcp_operator.readiness.drill.load import ClassFigures, StageFigures, WindowFigures
from mcp_operator.readiness.drill.summary import ended, ended_stages, stage_summary, wire

STAGE = Stage(name="mixed", load=StageLoad(rate=1600, duration_seconds=10, window_seconds=5))
FIGURES = StageFigures(
    requested="1600 req/s",
    achieved_rps=1598.04,
    p50_ms=4.0,
    p99_ms=None,
    completed=15980,
    errors=3,
    windows=(WindowFigures(0.0, 11.12345, 8000, 1), WindowFigures(5.0, None, 7980, 2, dropped=4)),
    dropped=4,
)


def test_a_stage_not_run_yet_holds_what_it_asks_for_only() -> None:
    assert wire(stage_summary(STAGE, "Pending")) == {
        "name": "mixed",
        "phase": "Pending",
        "requested": "1600 req/s",
    }
    assert wire(stage_summary(Stage(name="quiet"), "Running", started_at="t0")) == {
        "name": "quiet",
        "phase": "Running",
        "startedAt": "t0",
    }


def test_a_stage_that_ran_holds_its_figures_and_windows() -> None:
    row = wire(stage_summary(STAGE, "Done", FIGURES, started_at="t0", ended_at="t1"))
    assert row == {
        "name": "mixed",
        "phase": "Done",
        "startedAt": "t0",
        "endedAt": "t1",
        "requested": "1600 req/s",
        "achievedRps": "1598.0",
        "p50Ms": "4.00",
        "p99Ms": "",
        "errors": 3,
        "dropped": 4,
        "windows": [
            {"offsetSeconds": 0.0, "p99Ms": 11.123, "completed": 8000, "errors": 1, "dropped": 0},
            {"offsetSeconds": 5.0, "completed": 7980, "errors": 2, "dropped": 4},
        ],
    }
    assert StageSummary.model_validate(row).to_patch() == row  # the model reads back what it wrote


def test_a_mix_a_busy_client_and_shards_are_written_when_there_are_some() -> None:
    busy = replace(
        FIGURES,
        client_bound=("a" * 600, "b" * 600),
        source="MCPBenchmark x, 2 shard(s)",
        classes=(ClassFigures("health", 10, 0, 1.0, None),),
    )
    row = wire(stage_summary(STAGE, "Done", busy))
    assert len(row["clientBound"]) == 1024 and row["loadFrom"] == "MCPBenchmark x, 2 shard(s)"
    assert row["classes"] == [{"name": "health", "completed": 10, "errors": 0, "p50Ms": "1.00", "p99Ms": ""}]


def test_a_drill_that_ended_early_stops_the_running_stage_and_skips_the_rest() -> None:
    rows = [stage_summary(STAGE, phase) for phase in ("Done", "Running", "Pending")]
    assert [r.phase for r in ended(rows)] == ["Done", "Stopped", "Skipped"]
    assert [r.phase for r in rows] == ["Done", "Running", "Pending"]  # pure


def test_rows_another_operator_wrote_keep_what_they_hold_and_only_their_phase_ends() -> None:
    rows = [
        {"name": "a", "phase": "Succeeded"},  # a phase this model does not know: as it was
        {"name": "b", "phase": "Running", "addedLater": 1, "errors": "n/a"},
        {"name": "c"},
    ]
    assert ended_stages(rows) == [
        {"name": "a", "phase": "Succeeded"},
        {"name": "b", "phase": "Stopped", "addedLater": 1, "errors": "n/a"},
        {"name": "c"},
    ]
