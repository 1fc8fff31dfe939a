"""What the benchmark collects for the diagnosis: request classes and shape sweeps (payloads,
per-tag breakdowns merged exactly across shards), the plan's ``observe`` and the in-level
timeline of the server's gauges, SM idle gaps in telemetry, and ``mcp-bench diagnose``."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.cli_observers import build_observers
from mcp_bench.engines import plan_feature_problem, run_plan
from mcp_bench.load.payloads import payload_source
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.results.document import dumps_document, loads_document
from mcp_bench.results.merge import merge_documents
from mcp_bench.servermetrics.observer import ServerMetricsObserver
from mcp_bench.telemetry.stats import idle_gaps
from mcp_refserver import RefServerConfig, start_refserver

FIX = Path(__file__).parent / "fixtures"


def plan(**payload: Any) -> RunPlan:
    return RunPlan.from_dict(
        {
            "url": "http://127.0.0.1:1",
            "backend": "openai",
            "model": "m",
            "levels": {"concurrency": [2]},
            "stage": {"requests": 10},
            "payload": payload,
        }
    )


def test_classes_draw_by_weight_with_priorities() -> None:
    p = plan(classes=[{"name": "hi", "weight": 1, "priority": 0}, {"name": "lo", "weight": 3, "priority": 7}])
    drawn = list(itertools.islice(payload_source(p), 4000))
    lo = [x for x in drawn if x.tags == {"class": "lo"}]
    assert 2800 < len(lo) < 3200
    assert all(x.extra["priority"] == 7 for x in lo)
    assert {x.extra["priority"] for x in drawn if x.tags == {"class": "hi"}} == {0}
    again = list(itertools.islice(payload_source(p), 4000))
    assert [x.tags for x in again] == [x.tags for x in drawn]  # seeded


def test_shape_sweep_walks_the_shapes_and_classes_combine() -> None:
    p = plan(shape_sweep={"input_tokens": [2, 5], "repeats": 3}, classes=[{"name": "only"}])
    drawn = list(itertools.islice(payload_source(p), 7))
    assert [x.input_tokens for x in drawn] == [2, 2, 2, 5, 5, 5, 2]
    assert [len(x.prompt.split()) for x in drawn[:4]] == [2, 2, 2, 5]
    assert drawn[0].tags == {"shape": "2", "class": "only"} and "priority" not in drawn[0].extra


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"classes": [{"name": "a"}, {"name": "a"}]}, "distinct names"),
        ({"classes": [{"name": "bad name"}]}, "classes.0.name"),
        ({"shape_sweep": {"input_tokens": [0]}}, ">= 1"),
        ({"shape_sweep": {"input_tokens": [4]}, "workload": {"kind": "synthetic"}}, "not both"),
    ],
)
def test_bad_classes_and_sweeps_are_refused(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan(**payload)


def test_external_engines_refuse_classes_and_sweeps() -> None:
    p = RunPlan.from_dict(
        {
            "url": "http://127.0.0.1:1",
            "engine": "locust",
            "levels": {"concurrency": [1]},
            "stage": {"requests": 1},
            "payload": {"classes": [{"name": "a"}]},
        }
    )
    assert "payload.classes" in (plan_feature_problem(p) or "")


async def test_breakdowns_are_measured_and_merge_exactly_across_shards() -> None:
    cfg = RefServerConfig(ttft_ms=2, tpot_ms=1, shape_penalty_ms=30)
    async with await start_refserver(cfg) as srv:
        p = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "levels": {"concurrency": [2]},
                "stage": {"requests": 24},
                "payload": {
                    "max_output_tokens": 2,
                    "shape_sweep": {"input_tokens": [3, 9], "repeats": 6},
                    "classes": [{"name": "a", "priority": 0}, {"name": "b", "priority": 1}],
                },
            }
        )
        docs = [await run_plan(p) for _ in range(2)]
    level = docs[0].levels[0]
    assert level.breakdown is not None
    shapes = level.breakdown["shape"]
    assert set(shapes) == {"3", "9"} and sum(t.sent for t in shapes.values()) == 24
    assert shapes["3"].first_latency_ms is not None and shapes["3"].first_latency_ms >= 30
    assert shapes["3"].latency["e2e"].p50_ms < 30  # warm
    assert sum(t.completed for t in level.breakdown["class"].values()) == 24
    merged = merge_documents([loads_document(dumps_document(d)) for d in docs])
    m = merged.levels[0].breakdown
    assert m is not None
    assert m["shape"]["3"].sent == 24 and m["shape"]["3"].latency["e2e"].count == 24
    first = min(docs, key=lambda d: d.levels[0].breakdown["shape"]["3"].first_sent_unix_ns)  # type: ignore[index]
    assert m["shape"]["3"].first_latency_ms == first.levels[0].breakdown["shape"]["3"].first_latency_ms  # type: ignore[index]


async def test_plan_observe_builds_probes_and_a_timeline() -> None:
    cfg = RefServerConfig(ttft_ms=5, tpot_ms=5, capacity=1)
    async with await start_refserver(cfg) as srv:
        p = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "levels": {"concurrency": [4]},
                "stage": {"requests": 20},
                "payload": {"max_output_tokens": 4},
                "observe": {
                    "server_metrics": ["vllm"],
                    "triton_stats": ["refmodel"],
                    "timeline_interval_s": 0.05,
                },
            }
        )
        observers = build_observers(p)
        assert [type(o) for o in observers] == [ServerMetricsObserver]
        doc = await run_plan(p, observers)
    sm = doc.levels[0].server_metrics
    assert sm is not None and set(sm) == {"vllm-metrics", "triton-stats:refmodel"}
    tl = sm["vllm-metrics"]["timeline"]
    assert len(tl["t_s"]) >= 4 and tl["t_s"][0] == 0.0
    waiting = tl["metrics"]["vllm:num_requests_waiting"]["series"][0]["values"]
    assert max(v for v in waiting if v is not None) >= 1  # 4 users, 1 slot: the queue was seen
    assert "timeline" not in sm["triton-stats:refmodel"]
    assert doc.plan.observe.timeline_interval_s == 0.05


def test_idle_gaps() -> None:
    t = [i * 5_000_000 for i in range(10)]
    out = idle_gaps(t, [90, 2, 3, 95, 96, 0, 0, 0, 80, float("nan")])
    assert out["share"] == pytest.approx(5 / 9) and out["gaps"] == 2 and out["longest_ms"] == 15.0
    assert idle_gaps([], []) == {"status": "no_data"}


def test_cli_diagnose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["diagnose", "--trace", str(FIX / "unfused_decode.trace.json"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and [f["state"] for f in out if f["trap"] == 1] == ["Found"]
    assert main(["diagnose", "--trace", str(FIX / "fused_decode.trace.json")]) == 0
    capsys.readouterr()
    assert main(["diagnose"]) == 2
    assert main(["diagnose", "--ncu", str(tmp_path / "missing.csv")]) == 2
    assert main(["diagnose", "--trace", str(FIX / "fused_decode.trace.json"), "--threshold", "1.x=1"]) == 2
    assert "trap 1 has" in capsys.readouterr().err


def test_cli_server_metrics_interval() -> None:
    from mcp_bench.cli.common import UsageError
    from mcp_bench.cli.runflags import with_timeline_interval

    p = plan()
    assert with_timeline_interval(p, "250ms").observe.timeline_interval_s == 0.25
    assert with_timeline_interval(p, "off").observe.timeline_interval_s is None
    with pytest.raises(UsageError, match="50ms to 60s"):
        with_timeline_interval(p, "1ms")
