"""The memory forensics on what the GPU model server did on an H200 (measurements/results/
h200-2026-12-03/gpu-model-server/: text and multimodal at 64/256/512 streams, a 3 s settle wait).
Its live tensors returned to 12,792.9 MiB after every level while the caching allocator kept new
high-water marks: that is the allocator's cache (Cached), not a leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_bench.forensics.memory import MIB, allocator_fragmentation
from mcp_bench.forensics.sources import memory_forensics
from mcp_bench.results.document import loads_document

RUN = Path(__file__).parents[3] / "measurements" / "results" / "h200-2026-12-03" / "gpu-model-server"
LIVE = "vllm-metrics:mcp_gpu_model_server_torch_allocated_bytes"


@pytest.mark.parametrize("workload", ["text", "multimodal"])
def test_memory_kept_with_live_tensors_back_is_the_allocators_cache(workload: str) -> None:
    report = memory_forensics(loads_document((RUN / f"{workload}.result.json").read_text()))
    live = report[LIVE]
    assert live["state"] == "NotFound"
    assert [row["returned"] for row in live["levels"]] == [True, True, True]
    assert [row["after_bytes"] for row in live["levels"]] == [
        pytest.approx(12_792.9 * MIB, abs=0.1 * MIB)
    ] * 3
    gpu = report["vllm-metrics:nv_gpu_memory_used_bytes"]
    kept = [row["retained_bytes"] for row in gpu["levels"]]
    assert kept[0] > 500 * MIB and gpu["findings"]  # the first level raised the high-water mark most
    assert gpu["state"] == "NotFound" and {f["kind"] for f in gpu["findings"]} == {"Cached"}
    reserved = report["vllm-metrics:mcp_gpu_model_server_torch_reserved_bytes"]
    assert {f["kind"] for f in reserved["findings"]} == {"Cached"}
    # the host's resident set is no GPU allocator's cache: what it kept stays a finding
    rss = report["vllm-metrics:process_resident_memory_bytes"]
    assert rss["state"] == "Found" and {f["kind"] for f in rss["findings"]} == {"Leak"}


def test_the_allocator_snapshots_figures() -> None:
    text = allocator_fragmentation(json.loads((RUN / "text.snapshot.json").read_text()))
    assert text["reserved_bytes"] == 13_884 * MIB and text["free_blocks"] == 31
    assert text["allocated_bytes"] == pytest.approx(12_792.9 * MIB, abs=0.1 * MIB)
    assert text["free_entropy"] == pytest.approx(0.835, abs=0.001) and text["state"] == "Found"
    multimodal = allocator_fragmentation(json.loads((RUN / "multimodal.snapshot.json").read_text()))
    assert multimodal["free_entropy"] < 0.8 and multimodal["state"] == "NotFound"
