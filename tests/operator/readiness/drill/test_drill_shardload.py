"""The MCPBenchmark a drill stage's load becomes (``spec.drill.shards``), the profile's
durations on their own knob, and a stage's traffic mix. The drill with shard Jobs runs in
``e2e/test_drill_shards.py``."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.engines.runloop import level_metas, level_schedule, shard_plan
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.api.drill import DrillShards, DrillSpec, StageLoad
from mcp_operator.api.load import MAX_LEVELS
from mcp_operator.benchmark.barrier import barrier_on, first_level_only
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.readiness.drill.load import LoadRunner
from mcp_operator.readiness.drill.profile import expand
from mcp_operator.readiness.drill.shardload import LABEL_DRILL_OF, stage_benchmark, stage_benchmark_name
from mcp_operator.readiness.drill.stageplan import stage_plan
from mcp_refserver import RefServerConfig, start_refserver

UID = "0b9f3c5e-8d57-4d6a-9a55-1f3c1e2d7a10"


def _body(load: StageLoad, count: int = 4, gate: str = "gate") -> dict[str, Any]:
    shards = DrillShards.model_validate({"count": count, "runner": {"nodeSelector": {"pool": "load"}}})
    return stage_benchmark(
        gate=gate,
        gate_uid=UID,
        namespace="ml",
        stage="Mixed Stage",
        load=load,
        base_url="http://srv:8000",
        shards=shards,
    )


def test_a_stage_becomes_a_benchmark_whose_shards_share_its_rate_window_by_window() -> None:
    load = StageLoad(rate=3200, duration_seconds=6, window_seconds=1.5, path="/v2/health/ready")
    body = _body(load)
    spec = MCPBenchmarkSpec.model_validate(body["spec"])  # what the API server would take
    assert spec.shards == 4 and spec.runner.node_selector == {"pool": "load"}
    assert spec.load.rate == [800.0] * 4 and spec.load.duration_seconds == 1.5
    assert spec.load.arrival == "poisson" and spec.load.overload == "drop"
    # the same windows as the operator's own engine would run, each shard a quarter of each
    assert stage_plan(load, "http://srv:8000").levels.rate == [rate * 4 for rate in spec.load.rate]
    assert spec.load.request_timeout_seconds == stage_plan(load, "http://srv:8000").request_timeout_s == 5
    assert spec.target.url == "http://srv:8000" and spec.target.path == "/v2/health/ready"
    # held once, at the first level, and so for one shard too (the drill's faults count from it)
    assert spec.start_barrier is not None and first_level_only(spec) and barrier_on(spec)
    one = MCPBenchmarkSpec.model_validate(_body(load, count=1)["spec"])
    assert barrier_on(one) and one.load.rate == [3200.0] * 4
    plan = plan_from_spec(spec, "http://srv:8000", body["metadata"]["name"])
    assert plan.levels.rate == [800.0] * 4  # what each shard sends


@pytest.mark.parametrize(("given", "written"), [(0.5, 1), (120.0, 120), (1799.2, 1800)])
def test_the_start_timeout_is_written_in_whole_seconds(given: float, written: int) -> None:
    """The benchmark's startBarrier.timeoutSeconds is an integer in its schema: the API server
    refused the drill's child benchmark for any number the drill's own (a float) took."""
    shards = DrillShards.model_validate({"count": 2, "startTimeoutSeconds": given})
    body = stage_benchmark(
        gate="gate",
        gate_uid=UID,
        namespace="ml",
        stage="s",
        load=StageLoad(rate=10, duration_seconds=1),
        base_url="http://srv:8000",
        shards=shards,
    )
    timeout = body["spec"]["startBarrier"]["timeoutSeconds"]
    assert type(timeout) is int and timeout == written


@pytest.mark.parametrize("kind", ["rate", "concurrency"])
def test_a_stage_of_more_windows_than_a_benchmark_takes_runs_longer_windows(kind: str) -> None:
    """A generated spec found it: 49 windows made a child benchmark of 49 levels, which the API
    server refused (at most 16), and the drill ended in a traceback (issue 35, item 8). The
    windows are then fewer and longer, filling the stage all the same."""
    load = StageLoad(**{kind: 49}, duration_seconds=49, window_seconds=1)
    spec = MCPBenchmarkSpec.model_validate(_body(load)["spec"])  # what the API server would take
    levels = spec.load.rate if kind == "rate" else spec.load.concurrency
    assert levels is not None and len(levels) == MAX_LEVELS
    assert spec.load.duration_seconds == pytest.approx(49 / MAX_LEVELS)


def test_a_closed_loop_stage_rounds_each_shards_share_up() -> None:
    spec = MCPBenchmarkSpec.model_validate(
        _body(StageLoad(concurrency=10, duration_seconds=4, window_seconds=2))["spec"]
    )
    assert spec.load.concurrency == [3, 3] and spec.load.rate is None


def test_the_benchmark_is_the_gates_own_and_named_for_its_stage() -> None:
    body = _body(StageLoad(rate=10, duration_seconds=1))
    meta = body["metadata"]
    # a stage name that is no DNS label keeps a digest of itself, so two never meet
    assert meta["name"].startswith("gate-mixed-stage-") and meta["namespace"] == "ml"
    assert stage_benchmark_name("gate", "spike") == "gate-spike"
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("MCPReadiness", "gate", UID)
    assert meta["labels"][LABEL_DRILL_OF] == "gate"
    long = stage_benchmark_name("g" * 250, "spike")
    assert (
        len(long) <= 253
        and long.endswith("-spike")
        and long != stage_benchmark_name("g" * 249 + "h", "spike")
    )


@pytest.mark.parametrize(
    ("scale", "duration_scale", "seconds"), [(0.1, None, 6.0), (1.0, 0.1, 6.0), (1.0, None, 60.0)]
)
def test_the_profiles_durations_have_a_knob_of_their_own(
    scale: float, duration_scale: float | None, seconds: float
) -> None:
    drill = DrillSpec.model_validate({"profile": "MCP2026", "scale": scale, "durationScale": duration_scale})
    baseline, mixed, spike = expand(drill)
    assert baseline.load is not None and mixed.load is not None and spike.load is not None
    assert baseline.load.duration_seconds == seconds and spike.load.duration_seconds == seconds * 1.5
    assert baseline.load.rate == 500 * scale and mixed.load.rate == 3200 * scale
    assert spike.load.rate == pytest.approx(8960 * scale)


def test_the_shards_of_each_profile_stage_offer_its_rate_times_its_time() -> None:
    """At scale 0.35 (durationScale 0.1, 2 shards) the baseline offered 152 of 175 req/s, mixed
    1,138.7 of 1,120 and spike 3,068.4 of 3,136, the same in every run: both shards sent one
    seeded draw per window, and a free Poisson count strays by its square root. Each window of
    each shard now holds its share of rate x time within one, and each shard its own instants."""
    drill = DrillSpec.model_validate({"profile": "MCP2026", "scale": 0.35, "durationScale": 0.1})
    for stage in expand(drill):
        assert stage.load is not None and stage.load.rate is not None
        body = _body(stage.load, count=2)
        plan = plan_from_spec(MCPBenchmarkSpec.model_validate(body["spec"]), "http://srv:8000", "b")
        shards = [shard_plan(plan, index) for index in range(2)]
        drawn = [[level_schedule(p, meta) for meta in level_metas(p)] for p in shards]
        offered = sum(s.measured_count for schedules in drawn for s in schedules)
        windows = sum(len(schedules) for schedules in drawn)
        assert abs(offered - stage.load.rate * stage.load.duration_seconds) < windows, stage.name
        assert list(drawn[0][0].offsets_ns) != list(drawn[1][0].offsets_ns)


MIX = [
    {"name": "health", "weight": 6, "backend": "http", "path": "/health"},
    {"name": "infer", "weight": 3, "backend": "triton-http", "model": "refmodel"},
    {"name": "chat", "weight": 1, "backend": "openai-chat", "model": "refmodel"},
]


def test_a_mixed_stage_is_a_mix_in_the_operators_engine_and_in_shard_jobs() -> None:
    load = StageLoad.model_validate({"rate": 100, "durationSeconds": 2, "windowSeconds": 1, "classes": MIX})
    plan = stage_plan(load, "http://srv:8000")
    assert plan.backend == "mix" and plan.url == "http://srv:8000"
    assert [(c.name, c.backend, c.path) for c in plan.payload.classes] == [
        ("health", "http", "/health"),
        ("infer", "triton-http", None),
        ("chat", "openai-chat", None),
    ]
    spec = MCPBenchmarkSpec.model_validate(_body(load)["spec"])
    assert spec.target.backend == "mix" and spec.workload is not None and len(spec.workload.classes) == 3
    shard_plan = plan_from_spec(spec, "http://srv:8000", "b")
    assert shard_plan.backend == "mix" and shard_plan.payload.classes[1].model == "refmodel"


def test_the_profiles_mixed_stage_takes_the_drills_mix() -> None:
    drill = DrillSpec.model_validate({"profile": "MCP2026", "scale": 0.01, "mix": MIX})
    baseline, mixed, spike = expand(drill)
    assert mixed.load is not None and [c.name for c in mixed.load.classes] == ["health", "infer", "chat"]
    assert baseline.load is not None and spike.load is not None
    assert not baseline.load.classes and not spike.load.classes  # the calm and the spike stay plain


async def test_a_mixed_stage_reports_each_class_from_the_engines_own_run() -> None:
    load = StageLoad.model_validate({"rate": 60, "durationSeconds": 2, "windowSeconds": 1, "classes": MIX})
    started: list[float] = []
    async with await start_refserver(RefServerConfig(ttft_ms=2, tpot_ms=1)) as srv:
        got = await LoadRunner().run("mixed", load, srv.url, started.append)
    assert len(started) == 1 and len(got.windows) == 2
    by_name = {c.name: c for c in got.classes}
    assert set(by_name) == {"health", "infer", "chat"}
    assert all(c.errors == 0 and c.completed > 0 and c.p99_ms is not None for c in by_name.values()), by_name
    assert sum(c.completed for c in by_name.values()) == got.completed
