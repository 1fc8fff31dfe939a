"""What a spec asks the shards to collect for the diagnosis (spec.observe, spec.workload), the
checks on it before any Job, the shard reading the server's side, and status.diagnostics filled
from the merged shards of real runs against the reference server with a trap knob set."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.operator.attested import honest_logs

from mcp_bench.engines import run_plan
from mcp_bench.results.document import dumps_document
from mcp_operator.api import MCPBenchmarkSpec, MCPBenchmarkStatus
from mcp_operator.api.results import MAX_DIAGNOSTICS
from mcp_operator.benchmark.collect import PublishedObject, RunIdentity, read_shards
from mcp_operator.benchmark.contract import shard_object_name
from mcp_operator.benchmark.plan import plan_from_spec, prepare_plan
from mcp_operator.benchmark.status import merged_status
from mcp_operator.targets import SpecProblem
from mcp_refserver import RefServerConfig, start_refserver

UID, JOB, KEY = "uid-1", "bench-0a1b2c3d", b"k" * 32


def spec(**extra: Any) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://placeholder", "backend": "openai", "model": "refmodel"},
            "load": {"concurrency": [1, 12], "requests": 120},
            **extra,
        }
    )


async def exists(namespace: str, name: str) -> bool:
    return True


def test_observe_and_workload_become_the_plan() -> None:
    s = spec(
        observe={"serverMetrics": ["vllm", "triton=http://triton:8002/metrics"], "tritonStats": ["m"]},
        workload={
            "classes": [{"name": "chat", "weight": 3, "priority": 0, "latencyP99Ms": 200}, {"name": "batch"}],
            "shapeSweep": {"inputTokens": [16, 128], "repeats": 4},
            "maxOutputTokens": 4,
        },
    )
    plan = plan_from_spec(s, "http://vllm:8000", "b")
    assert plan.observe.server_metrics == ["vllm", "triton=http://triton:8002/metrics"]
    assert plan.observe.triton_stats == ["m"] and plan.observe.timeline_interval_s == 1.0
    assert plan.observe.settle_s == 0  # no wait between levels unless asked
    settled = spec(observe={"serverMetrics": ["vllm"], "settleSeconds": 2.5})
    assert plan_from_spec(settled, "http://vllm:8000", "b").observe.settle_s == 2.5
    assert [(c.name, c.weight, c.priority, c.latency_p99_ms) for c in plan.payload.classes] == [
        ("chat", 3.0, 0, 200.0),
        ("batch", 1.0, None, None),
    ]
    assert plan.payload.shape_sweep is not None and plan.payload.shape_sweep.input_tokens == [16, 128]
    assert plan.payload.max_output_tokens == 4
    bare = plan_from_spec(spec(), "http://vllm:8000", "b")
    assert bare.observe.empty and not bare.payload.classes and bare.payload.shape_sweep is None


@pytest.mark.parametrize(
    ("observe", "reason"),
    [
        ({"serverMetrics": ["http://169.254.169.254/metrics"]}, "TargetNotAllowed"),
        ({"tritonStats": ["m=http://metadata.google.internal:8000"]}, "TargetNotAllowed"),
        ({"serverMetrics": ["vllm=http://user:pw@vllm:8000"]}, "CredentialsInUrl"),
        # a bare URL whose query has '=': the host is 169.254.169.254, not what follows the '='
        ({"serverMetrics": ["http://169.254.169.254/metrics?name=vllm"]}, "TargetNotAllowed"),
    ],
)
async def test_observe_urls_pass_the_target_policy_before_any_job(
    observe: dict[str, Any], reason: str
) -> None:
    problem = await prepare_plan(spec(observe=observe), "ml", "b", exists)
    assert isinstance(problem, SpecProblem) and problem.reason == reason


async def test_observe_sources_are_checked_by_the_schema_and_the_engine() -> None:
    with pytest.raises(ValidationError):
        spec(observe={"serverMetrics": ["file:///etc/passwd"]})
    for url in ("file:///etc/passwd", "gopher://h:70/_", "ftp://h/x"):  # only http(s) or a bare host
        with pytest.raises(ValidationError, match=r"target\.url"):
            spec(target={"url": url})
    for url in ("h:8000", "https://[::1]:8443/v1", "10.0.0.1/p"):
        assert spec(target={"url": url}).target.url == url
    with pytest.raises(ValidationError):
        spec(workload={"classes": [{"name": "a b"}]})
    dup = await prepare_plan(spec(observe={"serverMetrics": ["vllm", "vllm"]}), "ml", "b", exists)
    assert isinstance(dup, SpecProblem) and dup.reason == "InvalidPlan" and "twice" in dup.message
    locust = await prepare_plan(
        spec(
            target={"url": "http://placeholder", "path": "/health"},
            load={"concurrency": [1], "requests": 5, "engine": "locust"},
            workload={"classes": [{"name": "a"}]},
        ),
        "ml",
        "b",
        exists,
    )
    assert isinstance(locust, SpecProblem) and locust.reason == "UnsupportedByEngine"


async def test_merged_status_carries_the_diagnosis() -> None:
    s = spec(
        workload={"shapeSweep": {"inputTokens": [4, 16, 64], "repeats": 4}, "maxOutputTokens": 2},
        observe={"serverMetrics": ["vllm"]},
        shards=2,
        load={"concurrency": [1], "requests": 12},
    )
    cfg = RefServerConfig(ttft_ms=2, tpot_ms=1, shape_penalty_ms=150)
    async with await start_refserver(cfg) as srv:
        plan = plan_from_spec(s, srv.url, "bench")
        from mcp_bench.cli_observers import plan_observers

        docs = await asyncio.gather(*(run_plan(plan, plan_observers(plan)) for _ in range(2)))  # 2 shards
    texts = []
    for i, doc in enumerate(docs):
        doc.shard_index = i
        doc.origin = {"runUid": UID, "job": JOB, "pod": f"{JOB}-{i}-x", "podUid": f"p{i}"}
        texts.append(PublishedObject(shard_object_name(JOB, i), frozenset({UID}), dumps_document(doc, KEY)))
    pods = {"p0": 0, "p1": 1}
    run = RunIdentity(uid=UID, job=JOB, shards=2, key=KEY, pods=pods, logs=honest_logs(pods, JOB, texts))
    readout = read_shards(run, texts)
    collected = merged_status(
        expected=2,
        succeeded=2,
        failed=0,
        readout=readout,
        conditions=[],
        generation=1,
        now="2026-01-01T00:00:00Z",
    )
    status = MCPBenchmarkStatus.model_validate(collected.status)  # only fields the CRD declares
    rows = collected.status["diagnostics"]
    assert [r["trap"] for r in rows] == list(range(13)) and len(rows) <= MAX_DIAGNOSTICS
    shapes = rows[12]
    assert shapes["key"] == "recompile-avalanche" and shapes["state"] == "Found", shapes["summary"]
    assert shapes["level"] == "c=2"  # cluster-wide: 2 shards x 1
    assert shapes["values"]["shapes"] == "3" and float(shapes["values"]["firstHitMs"]) >= 150
    assert shapes["values"]["compiles"] == "3"  # the server's counter, one compile per shape
    assert shapes["thresholds"]["firstOverWarm"] == "5" and shapes["advice"] and shapes["source"]
    assert rows[3]["state"] == "NotFound"  # the reference server's /metrics carry Triton's queue counters
    assert rows[8]["state"] == "NoData" and "spec.workload.classes" in rows[8]["needs"]  # no classes here
    assert status.diagnostics[12].state == "Found"


async def test_the_shard_reads_the_server_side_the_plan_asks_for(tmp_path: Path) -> None:
    from mcp_bench.cli_observers import plan_observers
    from mcp_bench.servermetrics.observer import ServerMetricsObserver

    plan = plan_from_spec(
        spec(observe={"serverMetrics": ["vllm"], "tritonStats": ["refmodel"]}), "http://x:1", "b"
    )
    (obs,) = plan_observers(plan)
    assert isinstance(obs, ServerMetricsObserver) and [p.name for p in obs.probes] == [
        "vllm-metrics",
        "triton-stats:refmodel",
    ]
    assert plan_observers(plan_from_spec(spec(), "http://x:1", "b")) == []


async def test_a_shard_pod_publishes_the_server_side_it_observed(
    kube_fake: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.operator.benchmark.test_benchmark_shard import NS, _run, _shard

    from mcp_bench.results.document import loads_document
    from mcp_operator.benchmark.contract import RESULT_KEY

    async with await start_refserver(RefServerConfig(ttft_ms=1, tpot_ms=1)) as srv:
        shard = await _shard(
            kube_fake,
            monkeypatch,
            tmp_path,
            srv.url,
            observe={"serverMetrics": ["vllm"], "tritonStats": ["refmodel"], "timelineIntervalSeconds": 0.05},
        )
        assert await _run() == 0
    published = kube_fake.get("ConfigMap", NS, shard.result_name)
    doc = loads_document(published["data"][RESULT_KEY], shard.key.encode())
    sm = doc.levels[0].server_metrics
    assert sm is not None and sm["vllm-metrics"]["status"] == "ok" and "timeline" in sm["vllm-metrics"]
    assert sm["triton-stats:refmodel"]["status"] == "ok"  # plain HTTP /delay is not inferences: zero counts
