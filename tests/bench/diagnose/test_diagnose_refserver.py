"""Every trap the reference server can produce on purpose, through a real run of the benchmark
(the built-in engine, the observers the plan asks for) and the detectors: Found with the knob set,
NotFound on its fixed twin. Traps 3, 6, 8, 10, 11 and 12."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.cli_observers import build_observers
from mcp_bench.diagnose import DiagnoseInputs, Finding, diagnose
from mcp_bench.engines import run_plan
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import ResultDocument
from mcp_refserver import RefServerConfig, start_refserver

pytestmark = pytest.mark.timing  # run under load by `make test-stress`


async def measure(server: dict[str, Any], plan: dict[str, Any], grpc: bool = False) -> ResultDocument:
    cfg = RefServerConfig.model_validate({**server, **({"grpc_port": 0} if grpc else {})})
    async with await start_refserver(cfg) as srv:
        url = srv.grpc_url if grpc else srv.url
        p = RunPlan.from_dict({"url": url, "model": cfg.model, **plan})
        return await run_plan(p, build_observers(p))


def trap(doc: ResultDocument, n: int, **inputs: Any) -> Finding:
    return diagnose(DiagnoseInputs(document=doc, **inputs))[n]


TRITON = {"backend": "triton-http", "observe": {"triton_stats": ["refmodel"]}}


async def test_trap3_batch_fill_wait_found_and_fixed() -> None:
    plan = {**TRITON, "levels": {"concurrency": [1]}, "stage": {"requests": 25}}
    waiting = await measure({"infer_ms": 1, "batch_max_size": 8, "batch_delay_ms": 10}, plan)
    f = trap(waiting, 3)
    assert f.state == "Found", (f.summary, f.values)
    assert f.values["queue_ms"] >= 9 and f.values["busy_share"] < 0.2
    fixed = trap(await measure({"infer_ms": 1}, plan), 3)
    assert fixed.state == "NotFound", (fixed.summary, fixed.values)
    assert fixed.values["queue_ms"] < 0.5


async def test_trap3_saturation_is_not_false_wait() -> None:
    # 20 ms per request: the client's own turn-around (slower on a busy host) stays small beside it
    plan = {**TRITON, "levels": {"concurrency": [8]}, "stage": {"requests": 60}}
    f = trap(await measure({"infer_ms": 20, "capacity": 1}, plan), 3)
    assert f.state == "NotFound", (f.summary, f.values)
    # queueing, but a model busier than the detector's bound for a false wait
    busy_max = f.thresholds["busy_max"]
    assert f.values["queue_share"] > 0.5 and f.values["busy_share"] > busy_max, f.values


VLLM = {
    "backend": "openai",
    "payload": {"prompt": "a b c d", "max_output_tokens": 24},
    "observe": {"server_metrics": ["vllm"], "timeline_interval_s": 0.05},
    "levels": {"concurrency": [8]},
    "stage": {"requests": 48},
}


async def test_trap6_preemption_below_full_cache_found_and_fixed() -> None:
    server = {"ttft_ms": 2, "tpot_ms": 2, "kv_block_tokens": 4}
    fragmented = trap(await measure({**server, "kv_blocks": 40, "kv_fragmentation": 0.5}, VLLM), 6)
    assert fragmented.state == "Found", fragmented
    assert fragmented.values["preemptions"] > 0 and fragmented.values["usage_at_preemption"] <= 0.5
    roomy = trap(await measure({**server, "kv_blocks": 4096}, VLLM), 6)
    assert roomy.state == "NotFound", roomy
    assert roomy.values["preemptions"] == 0


async def test_trap8_strict_priority_found_fifo_not_found() -> None:
    plan = {
        "backend": "openai",
        "payload": {
            "max_output_tokens": 4,
            "classes": [
                {"name": "interactive", "weight": 1, "priority": 0},
                {"name": "batch", "weight": 1, "priority": 10},
            ],
        },
        "levels": {"concurrency": [1, 12]},
        "stage": {"requests": 160},
        "slo": {"latency_p99_ms": 120},
    }
    server = {"ttft_ms": 10, "tpot_ms": 2, "capacity": 2}
    strict = await measure({**server, "priority": "strict"}, plan)
    f = trap(strict, 8)
    assert f.state == "Found", (f.summary, f.values)
    assert f.level == "c=12" and f.values["low_p99_ms"] > 120 >= f.values["high_p99_ms"]
    assert set(strict.levels[1].breakdown["class"]) == {"interactive", "batch"}  # type: ignore[index]
    fifo = trap(await measure(server, plan), 8)
    assert fifo.state == "NotFound", (fifo.summary, fifo.values)


async def test_trap10_unfair_instances_found_balanced_not_found() -> None:
    plan = {
        "backend": "openai",
        "payload": {"max_output_tokens": 4},
        "observe": {"server_metrics": ["triton"]},
        "levels": {"concurrency": [8]},
        "stage": {"requests": 160},
    }
    # 24 ms per request: the client's own overhead stays small beside it, so busy shares are high
    server = {"ttft_ms": 20, "tpot_ms": 1, "capacity": 1, "instances": 4}
    unfair = trap(await measure({**server, "instance_weights": [8, 1, 1, 1]}, plan), 10)
    assert unfair.state == "Found", unfair
    assert unfair.values["instances"] == 4 and unfair.values["starving"]
    fair = trap(await measure(server, plan), 10)
    assert fair.state == "NotFound", fair


async def test_trap11_expensive_http_codec_found_and_fixed() -> None:
    plan = {**TRITON, "levels": {"concurrency": [1]}, "stage": {"requests": 30}}
    grpc_plan = {**plan, "backend": "triton-grpc"}
    server = {"infer_ms": 10, "http_codec_ms": 10}
    http_doc = await measure(server, plan)
    grpc_doc = await measure(server, grpc_plan, grpc=True)
    f = trap(http_doc, 11, compare=grpc_doc)
    assert f.state == "Found", (f.summary, f.values)
    assert f.values["codec_share"] > 0.5 and f.values["http_over_grpc"] > 1.3
    assert trap(http_doc, 11).state == "NoData"  # the server's statistics alone never tell
    fixed = {"infer_ms": 10}
    f = trap(await measure(fixed, plan), 11, compare=await measure(fixed, grpc_plan, grpc=True))
    assert f.state == "NotFound", (f.summary, f.values)


async def test_trap12_first_hit_per_shape_found_and_fixed() -> None:
    plan = {
        "backend": "openai",
        "payload": {"max_output_tokens": 2, "shape_sweep": {"input_tokens": [4, 16, 64, 256], "repeats": 5}},
        "observe": {"server_metrics": ["vllm"]},
        "levels": {"concurrency": [1]},
        "stage": {"requests": 20},
    }
    server = {"ttft_ms": 2, "tpot_ms": 1}
    f = trap(await measure({**server, "shape_penalty_ms": 80}, plan), 12)
    assert f.state == "Found", (f.summary, f.values)
    assert f.values["shapes"] == 4 and f.values["slow_first_hits"] == 4 and f.values["compiles"] == 4
    fixed = trap(await measure(server, plan), 12)
    assert fixed.state == "NotFound", (fixed.summary, fixed.values)
    assert fixed.values["shapes"] == 4 and fixed.values["slow_first_hits"] == 0
