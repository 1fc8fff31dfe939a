"""The MCPBenchmark a drill stage's load becomes (``spec.drill.shards``), and the profile's
durations on their own knob. The drill with shard Jobs runs in ``e2e/test_drill_shards.py``."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.api.drill import DrillShards, DrillSpec, StageLoad
from mcp_operator.benchmark.barrier import barrier_on, first_level_only
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.readiness.drill.load import load_plan
from mcp_operator.readiness.drill.profile import expand
from mcp_operator.readiness.drill.shardload import LABEL_DRILL_OF, stage_benchmark, stage_benchmark_name

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
    # the same windows as the operator's own engine would run
    assert len(load_plan(load, "http://srv:8000")["levels"]["rate"]) == len(spec.load.rate)
    assert spec.target.url == "http://srv:8000" and spec.target.path == "/v2/health/ready"
    # held once, at the first level, and so for one shard too (the drill's faults count from it)
    assert spec.start_barrier is not None and first_level_only(spec) and barrier_on(spec)
    one = MCPBenchmarkSpec.model_validate(_body(load, count=1)["spec"])
    assert barrier_on(one) and one.load.rate == [3200.0] * 4
    plan = plan_from_spec(spec, "http://srv:8000", body["metadata"]["name"])
    assert plan.levels.rate == [800.0] * 4  # what each shard sends


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
