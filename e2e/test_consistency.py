"""Output consistency through the real operator: an MCPBenchmark with spec.consistency against
the reference server whose answers drift when more than 8 requests are in it. The shard pod
really runs mcp_bench, probing at rest and during each level; the merged levels and the status
rows say NotFound at one stream and Found at 24, from the same figures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.results.document import loads_document
from mcp_devcluster import stack

LOCAL = {"nodeSelector": {"mcp2026.io/local-runner": "true"}}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    proc, url = stack.start_refserver(
        tmp_path, "--ttft-ms", "2", "--tpot-ms", "1", "--drift-above-inflight", "8", "--drift-scale", "0.02"
    )
    try:
        yield url
    finally:
        stack.stop(proc)


def test_drift_under_load_in_status_and_report(kube: Any, server: str) -> None:
    name = "consistency"
    spec = {
        "target": {"url": server, "backend": "openai", "model": "refmodel"},
        "load": {"concurrency": [1, 24], "durationSeconds": 1.5},
        "workload": {"maxOutputTokens": 8},
        "consistency": {"probes": 3, "intervalSeconds": 0.2, "maxTokens": 8},
        "runner": LOCAL,
    }
    kube.apply(stack.custom_resource("MCPBenchmark", name, spec))
    waited = kube.wait(f"mcpbenchmark/{name}", "condition=Complete", timeout_s=240)
    status = kube.get("mcpbenchmark", name).get("status")
    assert waited.returncode == 0, (waited.stderr, status)
    rows = status["results"]
    assert [r["outputConsistency"].split()[0] for r in rows] == ["NotFound", "Found"], rows
    report = kube.get("configmap", status["reportName"])
    doc = loads_document(report["data"]["result.json"])
    quiet, loaded = (lv.consistency for lv in doc.levels)
    assert quiet is not None and loaded is not None
    assert quiet["compared"] >= 3 and quiet["mismatch_rate"] == 0.0 and quiet["l2_max"] == 0.0
    assert loaded["compared"] >= 3 and loaded["mismatch_rate"] > 0 and loaded["l2_max"] > 1e-3
