"""Output consistency on real runs against the reference server: probes answered at rest and
during each level, through the same protocol clients as the load. With the drift knob (answers
change when more than 6 requests are in the server) the loaded level is Found and the quiet one
NotFound; without it both are NotFound. OpenAI streams (tokens and logprobs) and V2 tensors.

The server is slow on purpose (25 ms to the first token): the loaded level then keeps far more
than 6 requests in the server with few requests a second, so a client slowed by a busy host (one
Python process sending gRPC streams) still loads it past the knob (at 32 ms a request, 200 req/s
keep 6 in flight; the c=32 level asks for about 1,000)."""

from __future__ import annotations

import asyncio
import csv
import io
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from mcp_bench.cli import main
from mcp_bench.cli_observers import plan_observers
from mcp_bench.engines import run_plan
from mcp_bench.htmlreport import render_html
from mcp_bench.junit import junit_xml
from mcp_bench.plan import RunPlan
from mcp_bench.report import csv_text
from mcp_bench.results import merge_documents
from mcp_bench.results.document import ResultDocument, dumps_document
from mcp_refserver import RefServerConfig, start_refserver
from mcp_refserver.drift import drift_of

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

DRIFT_ABOVE = 6  # requests in the server; the quiet level has at most 1 + PROBES
PROBES = 3


async def _measure(
    backend: str, drift: bool, workers: int = 1, stream: bool = True
) -> tuple[ResultDocument, int]:
    cfg = RefServerConfig.model_validate(
        {
            "ttft_ms": 25,
            "tpot_ms": 1,
            "infer_ms": 5,
            "grpc_port": 0 if backend == "triton-grpc" else None,
            **({"drift_above_inflight": DRIFT_ABOVE, "drift_scale": 0.02} if drift else {}),
        }
    )
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.grpc_url if backend == "triton-grpc" else srv.url,
                "backend": backend,
                "model": cfg.model,
                "payload": {"max_output_tokens": 8, "stream": stream},
                # 2 s levels: probing starts once the level's load is under way, which a busy
                # host delays; 32 in flight stay far above the drift knob's 6 (module docstring)
                "levels": {"concurrency": [1, 32]},
                "stage": {"duration_s": 2.0},
                "workers": workers,
                "consistency": {"probes": PROBES, "interval_s": 0.2, "max_tokens": 8, "seed": 3},
            }
        )
        doc = await run_plan(plan, plan_observers(plan))
        return doc, drift_of(srv.model).drifted


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, bool], tuple[ResultDocument, int]]:
    return {
        (backend, drift): asyncio.run(_measure(backend, drift))
        for backend in ("openai", "triton-http")
        for drift in (True, False)
    }


def _levels(doc: ResultDocument) -> list[dict[str, Any]]:
    out = []
    for lv in doc.levels:
        assert lv.consistency is not None, lv.level_label
        out.append(lv.consistency)
    return out


@pytest.mark.parametrize("backend", ["openai", "triton-http"])
def test_drift_found_under_load_only(
    runs: dict[tuple[str, bool], tuple[ResultDocument, int]], backend: str
) -> None:
    doc, drifted = runs[(backend, True)]
    quiet, loaded = _levels(doc)
    assert drifted > 0
    assert quiet["compared"] >= PROBES and quiet["state"] == "NotFound", quiet
    assert quiet["l2_max"] == 0.0
    assert loaded["compared"] >= PROBES and loaded["state"] == "Found", f"{loaded}"
    assert loaded["l2_max"] > loaded["threshold"]["l2"]
    if backend == "openai":  # tokens and their logprobs were returned and compared
        assert quiet["mismatch_rate"] == 0.0
        assert loaded["mismatch_rate"] > 0 and loaded["tokens"] >= 8 * loaded["compared"]
    else:
        assert loaded["mismatch_rate"] is None and loaded["tokens"] == 0


@pytest.mark.parametrize("backend", ["openai", "triton-http"])
def test_no_drift_without_the_knob(
    runs: dict[tuple[str, bool], tuple[ResultDocument, int]], backend: str
) -> None:
    doc, drifted = runs[(backend, False)]
    assert drifted == 0
    for c in _levels(doc):
        assert c["state"] == "NotFound", c
        assert c["compared"] >= PROBES and c["failed"] == 0 and c["l2_max"] == 0.0


def test_merge_show_and_report(
    runs: dict[tuple[str, bool], tuple[ResultDocument, int]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    drifting, clean = runs[("openai", True)][0], runs[("openai", False)][0]
    loaded_alone = _levels(drifting)[1]
    merged = merge_documents([drifting, clean])
    quiet, loaded = _levels(merged)
    for i, c in enumerate((quiet, loaded)):
        parts = [_levels(drifting)[i], _levels(clean)[i]]
        assert c["compared"] == sum(p["compared"] for p in parts)
        assert c["mismatched_tokens"] == sum(p["mismatched_tokens"] for p in parts)
        assert c["l2_max"] == max(p["l2_max"] for p in parts)
    assert (quiet["state"], loaded["state"]) == ("NotFound", "Found")  # one shard's drift is the level's
    path = tmp_path / "result.json"
    path.write_text(dumps_document(drifting), encoding="utf-8")
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Consistency" in out and "Found" in out and "output consistency Found" in out
    rows = list(csv.DictReader(io.StringIO(csv_text(drifting))))
    assert [r["consistency_state"] for r in rows] == ["NotFound", "Found"]
    assert float(rows[1]["consistency_l2_max"]) == loaded_alone["l2_max"]
    html = render_html(drifting)
    assert "<th>Consistency</th>" in html.replace(' scope="col"', "")
    cases = ET.fromstring(junit_xml(drifting)).iter("testcase")
    verdicts = {c.get("classname"): c.find("failure") for c in cases if c.get("name") == "output_consistency"}
    assert verdicts["c=1"] is None
    failure = verdicts["c=32"]
    assert failure is not None and failure.get("type") == "OutputDrift"


def test_worker_processes_probe_from_the_parent() -> None:
    doc, drifted = asyncio.run(_measure("openai", True, workers=2))
    quiet, loaded = _levels(doc)
    assert drifted > 0
    assert quiet["state"] == "NotFound" and loaded["state"] == "Found", (quiet, loaded)


@pytest.mark.parametrize(("backend", "stream"), [("openai-chat", False), ("triton-grpc", True)])
def test_chat_whole_answers_and_v2_grpc(backend: str, stream: bool) -> None:
    doc, drifted = asyncio.run(_measure(backend, True, stream=stream))
    quiet, loaded = _levels(doc)
    assert drifted > 0
    assert quiet["state"] == "NotFound" and loaded["state"] == "Found", (quiet, loaded)
    assert loaded["l2_max"] > loaded["threshold"]["l2"]


async def _one_level(server: dict[str, Any]) -> ResultDocument:
    cfg = RefServerConfig.model_validate({"ttft_ms": 2, "tpot_ms": 1, **server})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "payload": {"max_output_tokens": 4},
                "levels": {"concurrency": [2]},
                "stage": {"duration_s": 0.6},
                "consistency": {"probes": 2, "interval_s": 0.1, "max_tokens": 4},
            }
        )
        return await run_plan(plan, plan_observers(plan))


def test_answers_that_differ_at_rest_leave_no_baseline() -> None:
    # every request drifts (more than 0 in the server), so the at-rest repeats already disagree
    doc = asyncio.run(_one_level({"drift_above_inflight": 0, "drift_token_share": 0.5}))
    (c,) = _levels(doc)
    assert c["state"] == "NoData" and c["reason"].startswith("no baseline: at rest"), c


def test_probes_that_fail_are_no_data_never_a_pass() -> None:
    doc = asyncio.run(_one_level({"faults": {"error_rate": 1.0, "error_status": 503}}))
    (c,) = _levels(doc)
    assert c["state"] == "NoData" and c["compared"] == 0, c
    assert c["no_baseline"] + c["failed"] == c["probes"] > 0
    assert "HTTP 503" in c["reason"]
