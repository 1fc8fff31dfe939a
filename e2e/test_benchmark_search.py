"""Saturation search through the operator: an MCPBenchmark with spec.load.search runs one shard
pod that really searches a reference server of known capacity (4 slots x 100 ms V2 infers: 40
requests/s), and status.search reports the max-goodput rate and the knee within 10% of it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_bench.results.document import loads_document
from mcp_devcluster import stack

SLOTS, INFER_MS = 4, 100
CAPACITY_RPS = SLOTS * 1000 / INFER_MS


@pytest.fixture(scope="module")
def capped_refserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = stack.start_refserver(
        tmp_path_factory.mktemp("capped-refserver"), "--capacity", str(SLOTS), "--infer-ms", str(INFER_MS)
    )
    try:
        yield url
    finally:
        stack.stop(proc)


def _search(url: str, name: str, shards: int = 1, rate: list[float] | None = None) -> str:
    return stack.custom_resource(
        "MCPBenchmark",
        name,
        {
            "target": {"url": url, "backend": "triton-http", "model": "refmodel"},
            "load": {
                "rate": rate or [20],
                "arrival": "constant",
                "durationSeconds": 3,
                # constant arrivals: nothing queues below 40/s; above, the backlog grows through
                # the level and the 250 ms P99 is missed a few percent past capacity
                "search": {"floor": 2, "ceiling": 160, "tolerance": 0.05, "maxProbes": 10},
            },
            "shards": shards,
            "slo": {"latencyP99Ms": 250},
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
        },
    )


def test_a_search_finds_the_reference_servers_capacity(kube: Any, capped_refserver: str) -> None:
    kube.apply(_search(capped_refserver, "search"))
    waited = kube.wait("mcpbenchmark/search", "condition=Ready", timeout_s=150)
    assert waited.returncode == 0, waited.stderr
    status = kube.get("mcpbenchmark", "search")["status"]
    search = status["search"]
    print(f"status.search: {search}")  # the figures, in the test's log
    assert search["stopReason"] == "Converged", search
    found = float(search["maxGoodputLoad"])
    assert abs(found - CAPACITY_RPS) <= 0.1 * CAPACITY_RPS, search
    assert float(search["lowestFailingLoad"]) > found
    assert search["kneeLoad"] != "n/a", search
    assert abs(float(search["kneeLoad"]) - CAPACITY_RPS) <= 0.1 * CAPACITY_RPS, search
    assert float(search["maxGoodputRps"]) > 0.9 * found
    assert search["probes"] == len(status["results"]) <= 10
    assert status["verdict"] == "Pass"
    assert stack.condition_of(kube.get("mcpbenchmark", "search"))["message"].startswith("saturation search:")
    # the report holds every probe, in the order it ran, with the step that chose it
    report = loads_document(kube.get("configmap", status["reportName"])["data"]["result.json"])
    assert report.search is not None
    assert [p.load for p in report.search.probes] == [lv.requested_rate for lv in report.levels]
    assert report.search.probes[0].step == "start" and report.search.probes[0].load == 20


def test_a_search_over_several_shards_is_refused(kube: Any, capped_refserver: str) -> None:
    kube.apply(_search(capped_refserver, "search-sharded", shards=2))
    assert kube.wait("mcpbenchmark/search-sharded", "condition=Accepted=false", timeout_s=60).returncode == 0
    obj = kube.get("mcpbenchmark", "search-sharded")
    accepted = stack.condition_of(obj, "Accepted")
    assert accepted["reason"] == "SearchNeedsOneShard", accepted
    assert "jobName" not in obj["status"]


def test_the_api_server_refuses_a_search_from_several_levels(kube: Any, capped_refserver: str) -> None:
    refused = kube.apply(_search(capped_refserver, "search-levels", rate=[10, 20]), check=False)
    assert refused.returncode != 0
    assert "a search starts from one level" in refused.stderr
    refused = kube.apply(_search(capped_refserver, "search-outside", rate=[500]), check=False)
    assert refused.returncode != 0
    assert "between search.floor and search.ceiling" in refused.stderr
