from __future__ import annotations

from pathlib import Path

import pytest

from mcp_bench.plan import PlanError, RunPlan

BASE = {"url": "http://127.0.0.1:1/", "levels": {"concurrency": [1, 2]}, "stage": {"duration_s": 1}}


def test_minimal_plan_defaults() -> None:
    plan = RunPlan.from_dict(BASE)
    assert plan.backend == "http"
    assert not plan.levels.open_loop
    assert plan.levels.count == 2
    assert plan.max_connections == 2
    assert plan.slo.empty


def test_yaml_plan(tmp_path: Path) -> None:
    f = tmp_path / "plan.yaml"
    f.write_text(
        "url: http://127.0.0.1:9/v1\nbackend: openai\nmodel: m\n"
        "levels: {rate: [10, 100], arrival: gamma, burstiness: 0.5, max_concurrency: 64}\n"
        "stage: {warmup_s: 1, duration_s: 5}\nslo: {latency_p99_ms: 120, throughput_rps: 45}\n"
    )
    plan = RunPlan.from_yaml(f)
    assert plan.levels.open_loop and plan.levels.rate == [10, 100]
    assert plan.max_connections == 64
    assert plan.slo.latency_p99_ms == 120


def test_yaml_error_names_field_path(tmp_path: Path) -> None:
    f = tmp_path / "plan.yaml"
    f.write_text("url: http://127.0.0.1:9/\nlevels: {rate: [10, -1]}\nstage: {duration_s: 1}\n")
    with pytest.raises(PlanError, match=r"plan.yaml: levels: .*rate levels must be > 0"):
        RunPlan.from_yaml(f)
    f.write_text(
        "url: http://127.0.0.1:9/\nlevels: {concurrency: [1]}\nstage: {duration_s: 1}\nslo: {p99: 3}\n"
    )
    with pytest.raises(PlanError, match=r"slo\.p99: Extra inputs are not permitted"):
        RunPlan.from_yaml(f)
    f.write_text("url: http://127.0.0.1:9/\nlevels: {concurrency: [1]}\nstage: {duration_s: 0}\n")
    with pytest.raises(PlanError, match=r"stage\.duration_s: Input should be greater than 0"):
        RunPlan.from_yaml(f)


def test_plan_rejects_ambiguous_levels_and_unbounded_stage() -> None:
    with pytest.raises(PlanError, match="exactly one of"):
        RunPlan.from_dict({**BASE, "levels": {"concurrency": [1], "rate": [1.0]}})
    with pytest.raises(PlanError, match="exactly one of"):
        RunPlan.from_dict({**BASE, "levels": {}})
    with pytest.raises(PlanError, match="every level ends"):
        RunPlan.from_dict({**BASE, "stage": {"warmup_s": 1}})
    with pytest.raises(PlanError, match="url must start with http"):
        RunPlan.from_dict({**BASE, "url": "127.0.0.1:80"})


def test_yaml_not_a_mapping(tmp_path: Path) -> None:
    f = tmp_path / "plan.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(PlanError, match="a plan is a mapping"):
        RunPlan.from_yaml(f)
