"""The memory forensics on a real run: the reference server's memory model (simulated GPU memory
borrowed per request in service and kept per finished request, the kept part also held for real
in its resident set) read through /metrics during and after each of three identical levels."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.cli_observers import plan_observers
from mcp_bench.engines import run_plan
from mcp_bench.forensics.memory import MIB
from mcp_bench.forensics.sources import memory_forensics
from mcp_bench.htmlreport import render_html
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import ResultDocument, dumps_document
from mcp_refserver import RefServerConfig, start_refserver

REQUESTS = 48
BORROWED = 64 * MIB  # per request in service: 8 streams borrow 512 MiB
LEAK = 3 * MIB  # per finished request: 144 MiB kept per level


async def _measure(leak: int) -> ResultDocument:
    cfg = RefServerConfig.model_validate(
        {
            "ttft_ms": 40,
            "tpot_ms": 2,
            "gpu_memory_per_request_bytes": int(BORROWED),
            "leak_bytes_per_request": int(leak),
        }
    )
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "payload": {"max_output_tokens": 4},
                "levels": {"concurrency": [8, 8, 8]},
                "stage": {"requests": REQUESTS},
                "observe": {"server_metrics": ["triton"], "timeline_interval_s": 0.05, "settle_s": 0.3},
            }
        )
        return await run_plan(plan, plan_observers(plan))


@pytest.fixture(scope="module")
def docs() -> dict[str, ResultDocument]:
    return {name: asyncio.run(_measure(leak)) for name, leak in (("leaky", LEAK), ("clean", 0))}


@pytest.fixture(scope="module")
def runs(docs: dict[str, ResultDocument]) -> dict[str, dict[str, dict[str, Any]]]:
    return {name: memory_forensics(doc) for name, doc in docs.items()}


def _source(report: dict[str, dict[str, Any]], family: str) -> dict[str, Any]:
    (name,) = [k for k in report if k.endswith(":" + family)]
    return report[name]


def test_a_leaking_server_is_found_on_its_gpu_gauge_with_the_figures(runs: Any) -> None:
    gpu = _source(runs["leaky"], "nv_gpu_memory_used_bytes")
    assert gpu["state"] == "Found" and gpu["settled"] is True
    kinds = {f["kind"] for f in gpu["findings"]}
    assert kinds == {"Leak", "Growth"}, gpu["findings"]
    growth = next(f for f in gpu["findings"] if f["kind"] == "Growth")
    assert growth["values"]["per_repeat_bytes"] == pytest.approx(REQUESTS * LEAK, rel=0.01)
    for row in gpu["levels"]:
        # the peak saw requests in service (sampled every 50 ms), and each level kept exactly its leak
        assert row["rise_bytes"] >= 4 * BORROWED + REQUESTS * LEAK / 2
        assert row["retained_bytes"] == pytest.approx(REQUESTS * LEAK)
        assert row["returned"] is False and 10 < row["peak_percent"] < 15


def test_the_same_leak_is_found_in_the_real_resident_set(runs: Any) -> None:
    rss = _source(runs["leaky"], "process_resident_memory_bytes")
    growth = next(f for f in rss["findings"] if f["kind"] == "Growth")
    # real pages: the rise is the leak give or take what the process itself allocated meanwhile
    assert growth["values"]["rise_bytes"] == pytest.approx(2 * REQUESTS * LEAK, rel=0.25)


def test_a_server_that_gives_memory_back_has_no_finding(runs: Any) -> None:
    gpu = _source(runs["clean"], "nv_gpu_memory_used_bytes")
    assert gpu["state"] == "NotFound", gpu["findings"]
    assert all(row["returned"] is True and row["retained_bytes"] == 0 for row in gpu["levels"])
    assert all(row["rise_bytes"] >= 4 * BORROWED for row in gpu["levels"])
    assert _source(runs["clean"], "process_resident_memory_bytes")["state"] == "NotFound"


def test_the_command_exits_1_on_a_finding_0_without_and_3_with_nothing_to_judge(
    docs: dict[str, ResultDocument], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, doc in docs.items():
        (tmp_path / f"{name}.json").write_text(dumps_document(doc))
    assert main(["forensics", str(tmp_path / "leaky.json")]) == 1
    printed = capsys.readouterr().out
    assert "Growth at c=8: settled memory rose 288.0 MiB over 3 identical levels" in printed
    assert main(["forensics", str(tmp_path / "clean.json")]) == 0
    levels = [lv.model_copy(update={"server_metrics": None}) for lv in docs["clean"].levels]
    (tmp_path / "bare.json").write_text(dumps_document(docs["clean"].model_copy(update={"levels": levels})))
    assert main(["forensics", str(tmp_path / "bare.json")]) == 3
    assert "no memory readings" in capsys.readouterr().out


def test_the_html_report_shows_the_memory_table_and_findings(docs: dict[str, ResultDocument]) -> None:
    page = render_html(docs["leaky"])
    table = page.split('id="memory"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + 2 * 3  # header, and 3 levels of 2 sources
    assert "nv_gpu_memory_used_bytes" in table and "process_resident_memory_bytes" in table
    found = page.split('id="memory-findings"', 1)[1].split("</table>", 1)[0]
    assert found.count("Growth") == 2 and found.count("Leak") == 6
    assert 'id="memory-findings"' not in render_html(docs["clean"])
