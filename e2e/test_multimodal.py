"""Multimodal MCPBenchmarks through the real operator against the reference server: chat requests
whose "vision" class carries generated PNG images as content parts beside a text class, and V2
requests carrying a batch of image tensors. The shard pods really run mcp_bench; the server
counts what it received (``/debug/media``) and charges ``--image-ms`` per image, so the merged
per-class latency shows the images arrived, and the counts match what the result says was sent."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.results.document import loads_document
from mcp_devcluster import stack

LOCAL = {"nodeSelector": {"mcp2026.io/local-runner": "true"}}
IMAGE_MS = 20


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    proc, url = stack.start_refserver(
        tmp_path, "--ttft-ms", "2", "--tpot-ms", "1", "--image-ms", str(IMAGE_MS)
    )
    try:
        yield url
    finally:
        stack.stop(proc)


def media(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/debug/media", timeout=10) as r:
        counts: dict[str, Any] = json.load(r)
    return counts


def run(kube: Any, name: str, spec: dict[str, Any]) -> Any:
    """Apply, wait for completion, and return the merged result document (checksum verified)."""
    kube.apply(stack.custom_resource("MCPBenchmark", name, {**spec, "runner": LOCAL}))
    waited = kube.wait(f"mcpbenchmark/{name}", "condition=Complete", timeout_s=240)
    status = kube.get("mcpbenchmark", name).get("status")
    assert waited.returncode == 0, (waited.stderr, status)
    assert status["shards"]["reported"] == 1 and status["verdict"] == "Pass", status
    report = kube.get("configmap", status["reportName"])
    return loads_document(report["data"]["result.json"])


def test_chat_image_parts_per_class_through_the_operator(kube: Any, server: str) -> None:
    doc = run(
        kube,
        "mm-chat",
        {
            "target": {"url": server, "backend": "openai-chat", "model": "refmodel"},
            "load": {"concurrency": [2], "requests": 40},
            "slo": {"maxErrorRate": 0},
            "workload": {
                "inputTokens": {"kind": "histogram", "edges": [8, 32, 128], "weights": [3, 1]},
                "outputTokens": {"kind": "fixed", "value": 4},
                "sharedPrefixRatio": 0.5,
                "classes": [
                    {"name": "text", "weight": 1},
                    {
                        "name": "vision",
                        "weight": 1,
                        "images": {
                            "count": {"kind": "fixed", "value": 2},
                            "width": {"kind": "uniform", "low": 16, "high": 48},
                            "height": {"kind": "fixed", "value": 32},
                            "poolSize": 4,
                            "seed": 7,
                        },
                    },
                ],
            },
        },
    )
    [level] = doc.levels
    assert level.breakdown is not None
    classes = level.breakdown["class"]
    text, vision = classes["text"], classes["vision"]
    print(
        f"chat: text n={text.completed} P50 {text.latency['e2e'].p50_ms:.1f} ms; vision n={vision.completed} "
        f"P50 {vision.latency['e2e'].p50_ms:.1f} ms; server saw {media(server)}"
    )
    assert text.completed > 5 and vision.completed > 5
    assert text.failed == 0 and vision.failed == 0
    counts = media(server)
    assert counts["images"] == {"openai": 2 * vision.sent}  # every vision request's two images, no other
    assert counts["requests"] == {"openai": vision.sent}
    assert counts["formats"] == {"png": 2 * vision.sent}
    assert counts["bytes"]["openai"] > 2 * vision.sent * 16 * 32 * 3  # RGB noise does not compress
    # two images at IMAGE_MS each, before the first token: the vision class is that much slower
    gap = vision.latency["ttft"].p50_ms - text.latency["ttft"].p50_ms
    assert 2 * IMAGE_MS * 0.8 <= gap <= 2 * IMAGE_MS + 25, gap


def test_v2_image_tensors_through_the_operator(kube: Any, server: str) -> None:
    doc = run(
        kube,
        "mm-v2",
        {
            "target": {"url": server, "backend": "triton-http", "model": "refmodel"},
            "load": {"concurrency": [2], "requests": 20},
            "slo": {"maxErrorRate": 0},
            "workload": {"imageTensor": {"shape": [3, 32, 32], "datatype": "UINT8", "batch": 4, "seed": 1}},
        },
    )
    [level] = doc.levels
    counts = media(server)
    print(f"v2: n={level.completed} P50 {level.latency['e2e'].p50_ms:.1f} ms; server saw {counts}")
    assert level.completed == 20 and level.failed == 0
    assert counts["images"] == {"v2": 4 * 20} and counts["requests"] == {"v2": 20}
    assert counts["bytes"] == {"v2": 20 * 4 * 3 * 32 * 32}
    assert level.latency["e2e"].p50_ms >= 4 * IMAGE_MS  # four images in the batch, charged each
