"""The outcome a document records is the policy replayed over its levels: every probe with the
step that chose it, the answer, the knee; it survives the checksum, and shards' searches are
never merged (each chose its probes from its own figures)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.results import MergeError, dumps_document, loads_document, merge_documents
from mcp_bench.results.document import (
    EngineFingerprint,
    LevelResult,
    PercentileTable,
    ResultDocument,
    SloVerdict,
)
from mcp_bench.search.driver import probe_levels, search_outcome

CAPACITY = 40.0
PLAN = RunPlan.from_dict(
    {
        "url": "http://127.0.0.1:1",
        "levels": {"rate": [20]},
        "stage": {"duration_s": 1},
        "slo": {"latency_p99_ms": 250},
        "search": {"floor": 2, "ceiling": 200, "max_probes": 10},
    }
)


def measured(index: int, rate: float) -> LevelResult:
    """A level as a server of 40/s would give it: flat below capacity, queueing above."""
    over = max(0.0, rate - CAPACITY)
    mean = 100.0 + 1000.0 * over / CAPACITY
    return LevelResult(
        index=index,
        mode="open",
        requested_rate=rate,
        throughput_rps=min(rate, CAPACITY),
        goodput_rps=min(rate, CAPACITY) if over == 0 else 1.0,
        latency={"e2e_from_schedule": PercentileTable(count=100, mean_ms=mean, p99_ms=mean * 1.5)},
        slo=SloVerdict(passed=over == 0),
    )


def run() -> list[LevelResult]:
    levels: list[LevelResult] = []
    for meta in probe_levels(PLAN, levels):
        assert meta.requested_rate is not None and meta.index == len(levels)
        levels.append(measured(meta.index, meta.requested_rate))
    return levels


def document(levels: list[LevelResult]) -> ResultDocument:
    now = datetime.now(UTC)
    return ResultDocument(
        started_at=now,
        ended_at=now,
        engine=EngineFingerprint(),
        plan=PLAN,
        levels=levels,
        slo_passed=True,
        search=search_outcome(PLAN, levels),
    )


def test_the_outcome_replays_the_policy_over_the_levels() -> None:
    levels = run()
    outcome = search_outcome(PLAN, levels)
    assert [p.load for p in outcome.probes] == [lv.requested_rate for lv in levels]
    assert [p.step for p in outcome.probes][:4] == ["start", "bracket-up", "bracket-up", "bisect"]
    assert outcome.stop_reason == "converged"
    assert outcome.max_goodput_load == 40 and outcome.max_goodput_rps == 40
    assert outcome.lowest_failing_load is not None and 40 < outcome.lowest_failing_load <= 42
    assert outcome.knee is not None and outcome.knee.load == 40


def test_a_run_cut_short_says_so() -> None:
    outcome = search_outcome(PLAN, run()[:2])
    assert outcome.stop_reason == "budget_exhausted" and "before the search" in outcome.message
    assert (outcome.max_goodput_load, outcome.lowest_failing_load) == (40, None)  # as far as it got


def test_the_outcome_survives_the_checksum_and_a_one_shard_merge() -> None:
    doc = document(run())
    back = loads_document(dumps_document(doc))
    assert back.search == doc.search
    assert merge_documents([back]).search == doc.search
    with pytest.raises(MergeError, match="one shard"):
        merge_documents([back, back])
    plain = doc.model_copy(update={"search": None, "plan": PLAN.model_copy(update={"search": None})})
    assert "search" not in json.loads(dumps_document(plain))  # documents without one read as before


def test_the_html_report_shows_the_answer_the_knee_and_every_probe() -> None:
    pytest.importorskip("jinja2")
    from mcp_bench.htmlreport import render_html

    doc = document(run())
    html = render_html(doc)
    assert '<table id="search"' in html and '<table id="search-probes"' in html
    assert "40 r/s (40 good rps)" in html
    assert "at 40, shown at " in html and "converged: met at 40" in html
    probes = html.split('<table id="search-probes"')[1].split("</table>")[0]
    assert probes.count("<tr>") == 1 + len(doc.levels)  # the header and one row per probe
