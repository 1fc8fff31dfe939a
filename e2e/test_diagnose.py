"""The diagnosis through the real operator: MCPBenchmarks against reference servers whose trap
knobs produce a hidden latency trap on purpose, and against their fixed twins. The shard pods
run mcp_bench as they do in a cluster, collect what spec.observe and spec.workload ask for, and
the operator writes status.diagnostics from the merged result: Found on the trap, NotFound on the
twin, for traps 3 (batch-fill wait), 8 (strict priorities) and 12 (first hit per new shape)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_devcluster import stack

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

LOCAL = {"nodeSelector": {"mcp2026.io/local-runner": "true"}}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Any]:
    """Start reference servers with the given flags; all stopped at the end."""
    started: list[Any] = []

    def start(*flags: str) -> str:
        proc, url = stack.start_refserver(tmp_path, *flags)
        started.append(proc)
        return url

    try:
        yield start
    finally:
        for proc in started:
            stack.stop(proc)


def run(kube: Any, benchmarks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Apply the benchmarks together, wait for each to complete, return their diagnostics by trap."""
    for name, spec in benchmarks.items():
        kube.apply(stack.custom_resource("MCPBenchmark", name, {**spec, "runner": LOCAL}))
    out = {}
    for name in benchmarks:
        waited = kube.wait(f"mcpbenchmark/{name}", "condition=Complete", timeout_s=240)
        assert waited.returncode == 0, (name, waited.stderr, kube.get("mcpbenchmark", name).get("status"))
        status = kube.get("mcpbenchmark", name)["status"]
        assert status["shards"]["reported"] == 1, status
        rows = status["diagnostics"]
        assert [r["trap"] for r in rows] == list(range(13)), rows
        out[name] = {r["trap"]: r for r in rows}
        for r in rows:
            if r["state"] != "NoData":
                print(f"{name} trap {r['trap']}: {r['state']} at {r.get('level')}: {r['summary']}")
    return out


def test_trap3_batch_fill_wait_through_the_operator(kube: Any, servers: Any) -> None:
    def spec(url: str) -> dict[str, Any]:
        return {
            "target": {"url": url, "backend": "triton-http", "model": "refmodel"},
            "load": {"concurrency": [1], "requests": 30},
            "observe": {"tritonStats": ["refmodel"]},
        }

    batching = servers("--infer-ms", "1", "--batch-max-size", "8", "--batch-delay-ms", "15")
    fixed = servers("--infer-ms", "1")
    found = run(kube, {"false-wait": spec(batching), "false-wait-fixed": spec(fixed)})
    trap, twin = found["false-wait"][3], found["false-wait-fixed"][3]
    assert trap["state"] == "Found", trap
    assert float(trap["values"]["queueMs"]) >= 10 and float(trap["values"]["busyShare"]) < 0.5
    assert trap["source"].startswith("triton-stats:refmodel") and trap["advice"]
    assert twin["state"] == "NotFound", twin
    assert float(twin["values"]["queueMs"]) < 1


def test_trap8_strict_priorities_through_the_operator(kube: Any, servers: Any) -> None:
    def spec(url: str) -> dict[str, Any]:
        return {
            "target": {"url": url, "backend": "openai", "model": "refmodel"},
            "load": {"concurrency": [1, 12], "requests": 80},
            "slo": {"latencyP99Ms": 250},
            "workload": {
                "maxOutputTokens": 4,
                "classes": [
                    {"name": "interactive", "weight": 1, "priority": 0},
                    {"name": "batch", "weight": 1, "priority": 10},
                ],
            },
        }

    flags = ("--ttft-ms", "20", "--tpot-ms", "5", "--capacity", "2")
    strict = servers(*flags, "--priority", "strict")
    fifo = servers(*flags)
    found = run(kube, {"priority-strict": spec(strict), "priority-fifo": spec(fifo)})
    trap, twin = found["priority-strict"][8], found["priority-fifo"][8]
    assert trap["state"] == "Found", trap
    assert trap["level"] == "c=12" and trap["values"]["lowClass"] == "batch"
    assert float(trap["values"]["lowP99Ms"]) > 250 >= float(trap["values"]["highP99Ms"])
    assert twin["state"] == "NotFound", twin


def test_trap12_first_hit_per_shape_through_the_operator(kube: Any, servers: Any) -> None:
    def spec(url: str) -> dict[str, Any]:
        return {
            "target": {"url": url, "backend": "openai", "model": "refmodel"},
            "load": {"concurrency": [1], "requests": 20},
            "observe": {"serverMetrics": ["vllm"]},
            "workload": {"maxOutputTokens": 2, "shapeSweep": {"inputTokens": [4, 16, 64, 256], "repeats": 5}},
        }

    compiling = servers("--ttft-ms", "2", "--tpot-ms", "1", "--shape-penalty-ms", "150")
    fixed = servers("--ttft-ms", "2", "--tpot-ms", "1")
    found = run(kube, {"recompile": spec(compiling), "recompile-fixed": spec(fixed)})
    trap, twin = found["recompile"][12], found["recompile-fixed"][12]
    assert trap["state"] == "Found", trap
    assert trap["values"]["shapes"] == "4" and trap["values"]["slowFirstHits"] == "4"
    assert float(trap["values"]["firstHitMs"]) >= 150 and trap["values"]["compiles"] == "4"
    assert twin["state"] == "NotFound", twin
    # without the penalty no shape pays for a compile; a busy host may stall one first hit past
    # 5x the warm time, never the two shapes the trap needs
    assert float(twin["values"]["slowFirstHits"]) < float(twin["thresholds"]["minShapes"]), twin
