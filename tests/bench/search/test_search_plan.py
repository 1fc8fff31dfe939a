"""A plan's search is checked before any load: one level to start from inside its bounds, an SLO
a higher load can miss, whole numbers for concurrency; workers never search on their own."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.engines.workers import split_level
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.results.aggregate import LevelMeta


def plan(levels: dict[str, Any], slo: dict[str, Any] | None = None, **search: Any) -> RunPlan:
    return RunPlan.from_dict(
        {
            "url": "http://127.0.0.1:1",
            "levels": levels,
            "stage": {"requests": 10},
            "slo": {"latency_p99_ms": 100} if slo is None else slo,
            "search": {"floor": 1, "ceiling": 64, **search},
        }
    )


@pytest.mark.parametrize(
    ("levels", "slo", "search", "message"),
    [
        ({"rate": [10, 20]}, None, {}, "give exactly one level"),
        ({"rate": [100]}, None, {}, "outside floor..ceiling"),
        ({"rate": [10]}, {}, {}, "needs an SLO"),
        ({"rate": [10]}, {"latency_p99_ms": 100, "throughput_rps": 5}, {}, "throughput_rps"),
        ({"concurrency": [2]}, None, {"ceiling": 64.5}, "whole numbers"),
        ({"rate": [10]}, None, {"floor": 20, "ceiling": 5}, "above ceiling"),
        ({"rate": [10]}, None, {"max_probes": 33}, "max_probes"),
    ],
)
def test_a_search_that_cannot_run_is_refused(
    levels: dict[str, Any], slo: dict[str, Any] | None, search: dict[str, Any], message: str
) -> None:
    with pytest.raises(PlanError, match=message):
        plan(levels, slo, **search)


def test_a_search_plans_its_budget_and_its_ceilings_connections() -> None:
    p = plan({"concurrency": [2]}, max_probes=6)
    assert p.planned_levels == 6 and p.max_connections == 64
    assert RunPlan.from_dict({**p.model_dump(), "search": None}).planned_levels == 1


def test_worker_processes_run_the_level_the_search_chose() -> None:
    p = plan({"concurrency": [2]}).model_copy(update={"workers": 2})
    parts = split_level(p, LevelMeta(index=3, mode="closed", concurrency=8))
    assert [part.plan.search for part in parts] == [None, None]
    assert [part.plan.levels.concurrency for part in parts] == [[4], [4]]
    rated = plan({"rate": [10]}).model_copy(update={"workers": 2})
    assert split_level(rated, LevelMeta(index=1, mode="open", requested_rate=30))[0].plan.search is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rate", "10"], "needs --ceiling"),
        (["--rate", "10,20", "--ceiling", "50"], "give exactly one level"),
        (["--concurrency", "4", "--ceiling", "2"], "outside floor..ceiling"),
    ],
)
def test_the_search_command_refuses_a_search_that_cannot_run(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["search", "--url", "http://127.0.0.1:1", "--latency-sla", "100ms", *extra])
    assert code == 2
    assert message in capsys.readouterr().err
