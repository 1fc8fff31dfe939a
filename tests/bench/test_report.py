from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

from rich.console import Console

from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.report import csv_text, print_report
from mcp_bench.results import EngineFingerprint, ResultDocument
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.slo import overall
from mcp_bench.results.summary import gpu_memory_peak_pct

PLAN = RunPlan.from_dict(
    {
        "url": "http://127.0.0.1:1/",
        "levels": {"concurrency": [64, 256]},
        "stage": {"duration_s": 1},
        "slo": {"latency_p95_ms": 12},
    }
)


def _doc() -> ResultDocument:
    levels = []
    for i, conc in enumerate((64, 256)):
        acc = LevelAccumulator(PLAN.slo, open_loop=False, late_after_ns=10**6)
        for k in range(100):
            acc.add(RequestRecord(sent_ns=k * 10**6, end_ns=k * 10**6 + (10 + i * 5) * 10**6))
        levels.append(acc.to_result(LevelMeta(index=i, mode="closed", concurrency=conc)))
    levels[0].telemetry = {
        "status": "ok",
        "gpus": [{"memory_used_peak_pct": 40.0}, {"memory_used_peak_pct": 61.5}],
    }
    t = datetime.now(UTC)
    return ResultDocument(
        started_at=t,
        ended_at=t,
        engine=EngineFingerprint(),
        plan=PLAN,
        levels=levels,
        slo_passed=overall(levels),
    )


def test_gpu_memory_peak() -> None:
    assert gpu_memory_peak_pct("unavailable") is None
    assert gpu_memory_peak_pct({"status": "unavailable", "reason": "no NVML"}) is None
    assert gpu_memory_peak_pct({"status": "ok", "gpus": [{"memory_used_peak_pct": None}]}) is None
    assert gpu_memory_peak_pct({"shards": [None, {"gpus": [{"memory_used_peak_pct": 3.0}]}]}) == 3.0


def test_table_has_reference_columns() -> None:
    buf = io.StringIO()
    print_report(_doc(), Console(file=buf, width=200))
    text = buf.getvalue()
    for col in ("Level", "Mean ms", "P95 ms", "Throughput/s", "GPU mem peak %"):
        assert col in text
    assert "61.5" in text and "unavailable" in text
    assert "c=256: SLO latency_p95_ms missed" in text and "overall SLO: Fail" in text


def test_errors_are_counted_and_the_first_of_each_kind_is_shown() -> None:
    doc = _doc()
    doc.levels[1].errors = {ErrorKind.DISCONNECTED: 2}
    doc.levels[1].error_examples = {ErrorKind.DISCONNECTED: "server closed the connection [before answering]"}
    buf = io.StringIO()
    print_report(doc, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "c=256: errors disconnected=2" in text
    assert "first disconnected: server closed the connection [before answering]" in text  # not markup


def test_csv_rows() -> None:
    rows = list(csv.DictReader(io.StringIO(csv_text(_doc()))))
    assert [r["level"] for r in rows] == ["c=64", "c=256"]
    assert [r["slo"] for r in rows] == ["Pass", "Fail"]
    assert rows[0]["gpu_mem_peak_pct"] == "61.5" and rows[1]["gpu_mem_peak_pct"] == "unavailable"
    assert abs(float(rows[1]["e2e_mean_ms"]) - 15.0) < 0.05
    assert rows[0]["ttft_p50_ms"] == ""  # no data is empty, never 0
