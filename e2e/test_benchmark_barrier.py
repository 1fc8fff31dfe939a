"""MCPBenchmark shards that start together (issue 14, deliverables 3 and 9): three shard pods that
really run wait at each level's start barrier, the operator writes the common start time, the
merged level's P99 is the P99 of every request of the three shards (within the histograms'
precision), progress shows while it runs, and ``kubectl wait --for=condition=Complete`` (or
``Failed``) returns when it is over."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from mcp_bench.results.document import ResultDocument, loads_document
from mcp_bench.results.histogram import LatencyHistogram
from mcp_devcluster import stack

LOCAL = {"nodeSelector": {"mcp2026.io/local-runner": "true"}}


def _buckets(hist: LatencyHistogram) -> list[tuple[int, int, int]]:
    """(lowest, highest equivalent value, count) of every non-empty bucket, in the histogram's unit."""
    raw = hist._hist
    out = []
    for index, count in enumerate(raw.counts):
        if count:
            value = raw.get_value_from_index(index)
            out.append(
                (raw.get_lowest_equivalent_value(value), raw.get_highest_equivalent_value(value), count)
            )
    return out


def _p99_bounds_ms(shards: list[ResultDocument], level: int) -> tuple[float, float, int]:
    """Where the P99 of every request of every shard lies: all shards' recorded latencies pooled
    and sorted (no merge code used), the request of rank 0.99 n (nearest rank, n*0.99 rounded
    up or to the nearest: the two usual definitions), as the bounds of its histogram bucket."""
    pooled: list[tuple[int, int, int]] = []
    unit_ns = 0
    for doc in shards:
        hist = doc.levels[level].histogram("e2e")
        assert hist is not None
        unit_ns = 1000 if hist.unit == "us" else 1
        pooled += _buckets(hist)
    pooled.sort()
    total = sum(count for _, _, count in pooled)

    def bucket(rank: int) -> tuple[int, int]:
        seen = 0
        for low, high, count in pooled:
            seen += count
            if seen >= rank:
                return low, high
        raise AssertionError("no requests")

    first = bucket(max(1, min(math.ceil(0.99 * total), int(0.99 * total + 0.5))))
    last = bucket(max(math.ceil(0.99 * total), int(0.99 * total + 0.5)))
    return first[0] * unit_ns / 1e6, last[1] * unit_ns / 1e6, total


def test_three_shards_start_each_level_together_and_merge_to_the_p99_of_every_request(
    kube: Any, refserver: str
) -> None:
    spec = {
        "target": {"url": refserver, "backend": "http", "path": "/delay?ms=3"},
        "load": {"concurrency": [2, 6], "durationSeconds": 3},
        "shards": 3,
        "runner": LOCAL,
        "preflight": "off",
    }
    applied = time.monotonic()
    kube.apply(stack.custom_resource("MCPBenchmark", "together", spec))
    progress: list[dict[str, Any]] = []
    while time.monotonic() - applied < 120:
        obj = kube.get("mcpbenchmark", "together")
        status = obj.get("status") or {}
        if status.get("progress"):
            progress.append(status["progress"])
        if status.get("phase") in ("Succeeded", "Failed"):
            break
        time.sleep(0.5)
    waited = kube.wait("mcpbenchmark/together", "condition=Complete", timeout_s=60)
    assert waited.returncode == 0, waited.stderr
    obj = kube.get("mcpbenchmark", "together")
    status = obj["status"]
    assert status["verdict"] == "Pass", stack.condition_of(obj)
    assert stack.condition_of(obj, "Failed")["status"] == "False"
    overlapped = stack.condition_of(obj, "ShardsOverlapped")
    assert overlapped["status"] == "True" and overlapped["reason"] == "ShardsRanTogether"
    rows = status["results"]
    assert [row["level"] for row in rows] == ["c=6", "c=18"]  # cluster-wide: 3 shards x (2, 6)
    assert all(row["clusterWide"] and float(row["overlapPercent"]) >= 90 for row in rows), rows

    # live progress was there while it ran: the level, counts, and the barrier at work
    assert any(p["sent"] > 0 and p["level"] in ("1/2", "2/2") for p in progress), progress
    assert any("rateRps" in p and p["rateRps"] != "n/a" for p in progress), progress
    assert any(p.get("barrier") for p in progress), progress
    assert status["progress"]["level"] == "2/2" and status["progress"]["inFlight"] == 0

    job = status["jobName"]
    start = kube.get("configmap", f"{job}-start")
    signed = json.loads(start["data"]["start.json"])  # signed with the run's key by the operator
    assert isinstance(signed["hmac"], str)
    starts = {int(k): v for k, v in signed["levels"].items()}
    assert sorted(starts) == [0, 1]
    shards = [
        loads_document(kube.get("configmap", f"{job}-shard-{i}")["data"]["result.json"]) for i in range(3)
    ]
    report = loads_document(kube.get("configmap", status["reportName"])["data"]["result.json"])
    for level, row in enumerate(rows):
        # every shard waited for the same time and began its window right after it
        for doc in shards:
            lv = doc.levels[level]
            assert lv.start_at_unix_ns == starts[level]
            assert lv.first_start_unix_ns is not None
            assert 0 <= lv.first_start_unix_ns - starts[level] < 250_000_000, (level, doc.shard_index)
        low, high, total = _p99_bounds_ms(shards, level)
        assert row["requests"] == total == report.levels[level].completed
        p99 = float(row["p99Ms"])  # printed to 0.01 ms
        assert low - 0.0051 <= p99 <= high + 0.0051, (level, low, p99, high)
        merged = report.levels[level]
        assert merged.overlap is not None and merged.overlap >= 0.9 and merged.not_concurrent is None
        assert len(merged.shard_windows or []) == 3


def test_a_benchmark_that_measures_nothing_is_failed_for_kubectl_wait(kube: Any) -> None:
    spec = {
        "target": {"url": "http://127.0.0.1:9", "backend": "http", "path": "/"},
        "load": {"concurrency": [1], "requests": 2, "requestTimeoutSeconds": 1},
        "runner": LOCAL,
        "preflight": "off",
    }
    kube.apply(stack.custom_resource("MCPBenchmark", "nothing", spec))
    waited = kube.wait("mcpbenchmark/nothing", "condition=Failed", timeout_s=90)
    assert waited.returncode == 0, waited.stderr
    obj = kube.get("mcpbenchmark", "nothing")
    failed, complete = stack.condition_of(obj, "Failed"), stack.condition_of(obj, "Complete")
    assert failed["reason"] == "NothingMeasured" and complete["status"] == "False"
    assert obj["status"]["phase"] == "Failed"
