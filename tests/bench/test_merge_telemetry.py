"""GPU telemetry of many shards merges into a bounded summary that every reader still reads, and a
document over its object's limit is shrunk (plot points first) instead of refused."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_bench.diagnose import DiagnoseInputs, diagnose
from mcp_bench.diagnose.sources.levels import probe_deltas, telemetry_gpus
from mcp_bench.plan import RunPlan
from mcp_bench.records import RequestRecord
from mcp_bench.results import (
    EngineFingerprint,
    ResultDocument,
    dumps_document,
    loads_document,
    merge_documents,
)
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.fit import dumps_within
from mcp_bench.results.gpumerge import PLOT_VALUES, merge_telemetry, values_per_point
from mcp_bench.results.summary import gpu_memory_peak_pct
from mcp_bench.telemetry.fairness import gpu_fairness
from mcp_bench.telemetry.series import FIELDS, GpuInfo, TelemetrySeries
from mcp_bench.telemetry.stats import plot_points, summarise

CONFIGMAP_LIMIT = 1024 * 1024
MS = 1_000_000
PLAN = RunPlan.from_dict(
    {"url": "http://127.0.0.1:1/", "levels": {"concurrency": [64, 256, 512]}, "stage": {"requests": 5}}
)


def _level(index: int, seed: int) -> Any:
    rng = random.Random(seed)
    acc = LevelAccumulator(PLAN.slo, open_loop=False, late_after_ns=MS)
    for i in range(50):
        sent = i * 3 * MS
        acc.add(RequestRecord(sent_ns=sent, end_ns=sent + int(rng.uniform(5, 30) * MS)))
    return acc.to_result(LevelMeta(index=index, mode="closed", concurrency=PLAN.levels.concurrency[index]))  # type: ignore[index]


def _series(gpus: int, shard: int, seconds: float, busy: dict[int, float]) -> TelemetrySeries:
    """A synthetic series of ``gpus`` distinct GPUs (their UUIDs name the shard), each busy at its
    ``busy`` share of SM utilisation (60% by default)."""
    infos = [
        GpuInfo(i, "NVIDIA H200", f"GPU-{shard:04x}{i:04x}-0000-0000-0000-000000000000", 150 * 2**30)
        for i in range(gpus)
    ]
    series = TelemetrySeries(infos, 0.1)
    t0 = 1_000_000_000
    for k in range(int(seconds / 0.1)):
        t = t0 + int(k * 0.1e9)
        row = []
        for g in range(gpus):
            for f in FIELDS:
                if f == "sm_util_pct":
                    row.append(busy.get(g, 60.0) + (k % 7) * 0.5)
                elif f == "mem_used_bytes":
                    row.append(float(40 * 2**30 + (k % 11) * 2**20 + shard * 2**30))
                else:
                    row.append(((k * 7 + g) % 1000) / 10 + 0.123)
        series.append(t, t, t, row)
    series.stats.wall_ns = int(seconds * 1e9)
    return series


def _shard(
    index: int, gpus: int, seconds: float = 3 * 70, busy: dict[int, float] | None = None
) -> ResultDocument:
    """A shard document whose telemetry is filled as TelemetryObserver fills it on a GPU node."""
    t = datetime.now(UTC)
    doc = ResultDocument(
        started_at=t,
        ended_at=t,
        engine=EngineFingerprint(),
        plan=PLAN,
        levels=[_level(i, seed=index * 10 + i) for i in range(3)],
        shard_index=index,
    )
    series = _series(gpus, index, seconds, busy or {})
    t0, span = 1_000_000_000, seconds / 3
    for i, level in enumerate(doc.levels):
        start, end = t0 + int(i * span * 1e9), t0 + int((i + 1) * span * 1e9)
        summary = summarise(series, start, end)
        if gpus > 1:
            summary["fairness"] = gpu_fairness(series.window(start, end))
        level.telemetry = summary
    run = summarise(series, None, None)
    run["plot"] = plot_points(series.window(None, None), 500)
    doc.telemetry = run
    return doc


def test_the_reference_gpu_sweep_on_8_gpu_nodes_merges_into_a_report_that_fits() -> None:
    shards = [_shard(i, 8) for i in range(4)]
    shard_size = max(len(dumps_document(d)) for d in shards)
    merged = merge_documents(shards)
    report = dumps_document(merged)
    print(f"\n4 shards x 8 distinct GPUs: shard result {shard_size:,} B, report {len(report):,} B")
    assert len(report) < CONFIGMAP_LIMIT // 2
    tel = merged.levels[0].telemetry
    assert isinstance(tel, dict) and tel["status"] == "ok" and tel["shards_merged"] == 4
    assert len(telemetry_gpus(merged.levels[0])) == 32  # every shard's GPUs, once each
    assert {g["shard"] for g in tel["gpus"]} == {0, 1, 2, 3}
    peak = max(gpu_memory_peak_pct(d.levels[0].telemetry) or 0 for d in shards)
    assert gpu_memory_peak_pct(tel) == pytest.approx(peak, rel=1e-5)  # figures to 6 digits
    assert len(tel["fairness"]["shares"]) == 32
    assert isinstance(merged.telemetry, dict)
    plot: dict[str, Any] = merged.telemetry["plot"]
    numbers = sum(len(s["t_s"]) * values_per_point(s) for s in plot["series"])
    assert plot["status"] == "ok" and numbers <= PLOT_VALUES and len(plot["series"]) == 4
    assert loads_document(report).levels[0].telemetry == merged.levels[0].telemetry


def test_a_gpu_two_shards_both_saw_is_kept_once() -> None:
    a, b = _shard(0, 2), _shard(1, 2)
    b.levels[0].telemetry = a.levels[0].telemetry  # the same devices over the same time
    merged = merge_telemetry([a.levels[0].telemetry, b.levels[0].telemetry])
    assert merged is not None and [g["shard"] for g in merged["gpus"]] == [0, 0]


def test_a_starved_gpu_on_one_shard_is_found_in_the_merged_document() -> None:
    shards = [_shard(0, 2, seconds=30), _shard(1, 2, seconds=30, busy={1: 2.0})]
    merged = merge_documents(shards)
    starvation = next(f for f in diagnose(DiagnoseInputs(document=merged)) if f.trap == 10)
    assert starvation.state == "Found", starvation.summary
    assert "shard1/gpu1" in str(starvation.values) or "shard1/gpu1" in starvation.summary
    screening = next(f for f in diagnose(DiagnoseInputs(document=merged)) if f.trap == 0)
    assert screening.state != "NoData"


def test_shards_without_telemetry_are_grouped_by_reason() -> None:
    ok = _shard(0, 1, seconds=30).levels[0].telemetry
    gone = {"status": "unavailable", "reason": "NVML library not found"}
    merged = merge_telemetry([ok, gone, gone])
    assert merged is not None and merged["shards_without"] == {"unavailable: NVML library not found": [1, 2]}
    none = merge_telemetry([gone] * 256)
    assert none is not None and none["status"] == "unavailable" and len(none["shards_without"]) == 1
    assert gpu_memory_peak_pct(none) is None


def test_server_metrics_keep_one_usable_delta_per_probe() -> None:
    levels = [_level(0, 1), _level(0, 2), _level(0, 3)]
    levels[0].server_metrics = {"vllm": {"status": "error", "reason": "refused"}}
    levels[1].server_metrics = {"vllm": {"status": "ok", "metrics": {}, "from": 1}}
    levels[2].server_metrics = {"vllm": {"status": "ok", "metrics": {}, "from": 2}}
    t = datetime.now(UTC)
    docs = [
        ResultDocument(started_at=t, ended_at=t, engine=EngineFingerprint(), plan=PLAN, levels=[lv])
        for lv in levels
    ]
    merged = merge_documents(docs)
    assert merged.levels[0].server_metrics == {"vllm": {"status": "ok", "metrics": {}, "from": 1}}
    assert probe_deltas(merged.levels[0])["vllm"]["from"] == 1


def test_a_report_over_its_limit_drops_plot_points_first() -> None:
    merged = merge_documents([_shard(i, 8) for i in range(4)])
    full = dumps_document(merged)
    limit = len(full) - 40_000
    text = dumps_within(merged, limit)
    assert len(text.encode()) <= limit
    shrunk = loads_document(text)
    assert shrunk.notes[-1].startswith(f"shrunk to fit {limit} bytes: plot down to ")
    assert shrunk.telemetry["plot"]["points"] < merged.telemetry["plot"]["points"]  # type: ignore[index]
    assert [lv.histograms for lv in shrunk.levels] == [lv.histograms for lv in merged.levels]
    assert [lv.telemetry for lv in shrunk.levels] == [lv.telemetry for lv in merged.levels]
    assert dumps_document(merged) == full  # the document itself is left as it was


def test_a_report_of_many_gpus_keeps_the_idlest_and_busiest_to_fit() -> None:
    shards = [_shard(i, 8, seconds=30, busy={3: 1.0} if i == 5 else {}) for i in range(16)]
    merged = merge_documents(shards)
    limit = 150_000
    assert len(dumps_document(merged)) > limit
    shrunk = loads_document(dumps_within(merged, limit))
    assert len(dumps_document(shrunk)) <= limit
    tel = shrunk.levels[0].telemetry
    assert isinstance(tel, dict) and tel["gpus_total"] == 128 and len(tel["gpus"]) < 128
    assert any((g["shard"], g["index"]) == (5, 3) for g in tel["gpus"])  # the idle one stays
    assert "shares" not in tel["fairness"] and tel["fairness"]["instances"] == 128
    assert "per-GPU entries cut to" in shrunk.notes[-1] and "plot dropped" in shrunk.notes[-1]


def test_a_signed_document_is_signed_after_it_was_shrunk() -> None:
    doc = _shard(0, 8)
    key = b"k" * 32
    text = dumps_within(doc, len(dumps_document(doc, key)) - 10_000, key)
    assert loads_document(text, key).telemetry["plot"]["t_s"]  # type: ignore[index]
