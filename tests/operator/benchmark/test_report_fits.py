"""The report object of a large run: 64 shards of 8 GPUs each and 5 levels merge into a document
that fits its ConfigMap (``contract.RESULT_LIMIT_BYTES``, shrunk as the collector shrinks it) and
still renders as the HTML report with its GPU columns."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from html.parser import HTMLParser

from mcp_bench.htmlreport import render_html
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
from mcp_bench.results.document import LevelResult
from mcp_bench.results.fit import dumps_within
from mcp_bench.telemetry.series import FIELDS, GpuInfo, TelemetrySeries
from mcp_bench.telemetry.stats import plot_points, summarise
from mcp_operator.benchmark.contract import RESULT_LIMIT_BYTES, report_object

SHARDS, GPUS, LEVELS = 64, 8, (8, 16, 32, 64, 128)
MS = 1_000_000
PLAN = RunPlan.from_dict(
    {"url": "http://127.0.0.1:1/", "levels": {"concurrency": list(LEVELS)}, "stage": {"requests": 40}}
)


def _series(shard: int, samples: int) -> TelemetrySeries:
    """What the NVML sampler keeps for 8 distinct GPUs (UUIDs name the shard), 100 ms apart."""
    infos = [GpuInfo(i, "NVIDIA H200", f"GPU-{shard:04x}{i:04x}-0-0-0", 150 * 2**30) for i in range(GPUS)]
    series = TelemetrySeries(infos, 0.1)
    rng = random.Random(shard)
    for k in range(samples):
        t = 1_000_000_000 + k * 100 * MS
        row = [
            rng.uniform(20, 95)
            if f == "sm_util_pct"
            else 40 * 2**30 + k * 2**20
            if f == "mem_used_bytes"
            else 300.0
            for _ in infos
            for f in FIELDS
        ]
        series.append(t, t, t, row)
    series.stats.wall_ns = samples * 100 * MS
    return series


def _levels() -> list[LevelResult]:
    """One shard's measured levels (every shard measures the same: only its GPUs differ)."""
    rng = random.Random(0)
    levels = []
    for i, concurrency in enumerate(LEVELS):
        acc = LevelAccumulator(PLAN.slo, open_loop=False, late_after_ns=MS)
        for k in range(40):
            sent = k * 2 * MS
            acc.add(RequestRecord(sent_ns=sent, end_ns=sent + int(rng.uniform(5, 50) * MS)))
        levels.append(acc.to_result(LevelMeta(index=i, mode="closed", concurrency=concurrency)))
    return levels


def _shard(index: int, levels: list[LevelResult]) -> ResultDocument:
    t = datetime.now(UTC)
    doc = ResultDocument(
        started_at=t,
        ended_at=t,
        engine=EngineFingerprint(),
        plan=PLAN,
        levels=[lv.model_copy(deep=True) for lv in levels],
        shard_index=index,
    )
    per_level = 30  # 3 s a level
    series = _series(index, per_level * len(LEVELS))
    for i, level in enumerate(doc.levels):
        start = 1_000_000_000 + i * per_level * 100 * MS
        level.telemetry = summarise(series, start, start + per_level * 100 * MS)
    run = summarise(series)
    run["plot"] = plot_points(series.window(None, None), 500)
    doc.telemetry = run
    return doc


class _Levels(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._on = False
        self._cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._on = ("id", "levels") in attrs
        elif self._on and tag == "tr":
            self.rows.append([])
        elif self._on and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._on = False
        elif self._on and tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_64_shards_of_8_gpus_and_5_levels_fit_one_report_object_and_render() -> None:
    levels = _levels()
    shards = [_shard(i, levels) for i in range(SHARDS)]
    merged = merge_documents(shards)
    t0 = time.perf_counter()
    text = dumps_within(merged, RESULT_LIMIT_BYTES)  # as the collector writes the report
    report = report_object(benchmark="big", uid="u", document_text=text)
    assert len(dumps_document(merged)) > RESULT_LIMIT_BYTES  # so it was shrunk to fit
    assert len(report["data"]["result.json"].encode()) <= RESULT_LIMIT_BYTES
    doc = loads_document(text)
    assert [lv.completed for lv in doc.levels] == [SHARDS * 40] * len(LEVELS)  # histograms kept whole
    html = render_html(doc)
    elapsed = time.perf_counter() - t0
    header, *rows = _Levels(html).rows
    assert [r[0] for r in rows] == [lv.level_label for lv in doc.levels]
    assert "GPU mem peak %" in header and "SM util %" in header
    column = header.index("GPU mem peak %")
    assert all(r[column] != "unavailable" for r in rows)
    shape = f"{SHARDS} shards x {GPUS} GPUs x {len(LEVELS)} levels"
    print(f"\n{shape}: report {len(text):,} B, fit and render {elapsed:.1f} s")
