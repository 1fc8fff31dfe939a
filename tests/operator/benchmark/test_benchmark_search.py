"""spec.load.search: the schema, the plan the shard runs, the one-shard rule, and status.search
from a real search against the reference server in its own process (2 slots of 200 ms: 2
requests in service at once, a third waits a whole service; a 300 ms P99 leaves 100 ms for a
busy host's scheduling)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.operator.attested import honest_logs

from mcp_bench.engines import run_plan
from mcp_bench.results.document import dumps_document
from mcp_devcluster import stack
from mcp_operator.api import MCPBenchmarkSpec, MCPBenchmarkStatus
from mcp_operator.benchmark.collect import PublishedObject, RunIdentity, read_shards
from mcp_operator.benchmark.contract import shard_object_name
from mcp_operator.benchmark.plan import plan_from_spec, prepare_plan
from mcp_operator.benchmark.status import merged_status
from mcp_operator.conditions import condition
from mcp_operator.targets import SpecProblem

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

UID, JOB, KEY = "5e2a1c9f-0b1d-4f6e-8a3b-7c9d2e1f0a4b", "bench-5e2a1c9f", b"k" * 32


def spec(load: dict[str, Any] | None = None, shards: int = 1) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://refserver:8000", "backend": "triton-http", "model": "refmodel"},
            "load": load
            or {"concurrency": [1], "requests": 12, "search": {"floor": 1, "ceiling": 8, "maxProbes": 6}},
            "shards": shards,
            "slo": {"latencyP99Ms": 300},
            "preflight": "off",
        }
    )


async def exists(namespace: str, name: str) -> bool:
    return True


def test_the_plan_carries_the_search_in_the_engines_spelling() -> None:
    plan = plan_from_spec(spec(), "http://refserver:8000", "b")
    assert plan.search is not None
    assert (plan.search.floor, plan.search.ceiling, plan.search.max_probes, plan.search.factor) == (
        1,
        8,
        6,
        2,
    )
    assert plan.levels.concurrency == [1]
    assert plan_from_spec(spec({"rate": [5], "requests": 10}), "http://r:1", "b").search is None


async def test_a_search_with_more_than_one_shard_is_refused() -> None:
    problem = await prepare_plan(spec(shards=3), "ml", "b", exists)
    assert isinstance(problem, SpecProblem) and problem.reason == "SearchNeedsOneShard"
    assert "spec.shards is 3" in problem.message
    assert not isinstance(await prepare_plan(spec(), "ml", "b", exists), SpecProblem)


async def test_a_search_without_an_slo_is_an_invalid_plan() -> None:
    bare = spec().model_copy(update={"slo": spec().slo.model_copy(update={"latency_p99_ms": None})})
    problem = await prepare_plan(bare, "ml", "b", exists)
    assert isinstance(problem, SpecProblem) and problem.reason == "InvalidPlan"
    assert "needs an SLO" in problem.message


@pytest.mark.parametrize(
    "search",
    [{"floor": 10, "ceiling": 5}, {"floor": 1, "ceiling": 8, "maxProbes": 33}, {"floor": 0, "ceiling": 8}],
)
def test_bounds_are_checked(search: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        spec({"concurrency": [1], "requests": 5, "search": search})


async def test_status_shows_the_max_goodput_load_and_the_knee(tmp_path: Path) -> None:
    # its own process: a server on the test's event loop would stall with the client on a busy host
    server, url = stack.start_refserver(tmp_path, "--capacity", "2", "--infer-ms", "200")
    try:
        doc = await run_plan(plan_from_spec(spec(), url, "b"))
    finally:
        stack.stop(server)
    doc.shard_index = 0
    doc.origin = {"runUid": UID, "job": JOB, "pod": f"{JOB}-0-x", "podUid": "pod-uid-0"}
    name = shard_object_name(JOB, 0)
    objects = [PublishedObject(name, frozenset({UID}), dumps_document(doc, KEY))]
    pods = {"pod-uid-0": 0}
    readout = read_shards(
        RunIdentity(uid=UID, job=JOB, shards=1, key=KEY, pods=pods, logs=honest_logs(pods, JOB, objects)),
        objects,
    )
    collected = merged_status(
        expected=1,
        succeeded=1,
        failed=0,
        readout=readout,
        conditions=[],
        generation=1,
        now="2026-01-01T00:00:00Z",
    )
    status = collected.status
    MCPBenchmarkStatus.model_validate(status)
    search = status["search"]
    # two in service at once: a third waits a whole service (400 ms > the 300 ms P99)
    assert (search["maxGoodputLoad"], search["lowestFailingLoad"]) == ("2", "3"), search
    assert search["stopReason"] == "Converged"
    # the first load on the plateau: the slot count, or one more where the client's turn-around
    # (longer on a busy host) leaves the slots idle 5 % of the time at 2 in flight
    assert search["kneeLoad"] in ("2", "3"), search
    assert search["probes"] == len(status["results"]) == 4  # 1, 2, 4, 3
    ready = condition(status["conditions"], "Ready")
    assert ready is not None and ready["status"] == "True" and ready["reason"] == "SloMet"
    assert "max goodput at 2" in ready["message"]
