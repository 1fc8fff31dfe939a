"""``mcp-operator report`` picks the namespace as kubectl does: the kubeconfig's current context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.operator.cannedapi import canned_api

from mcp_bench.engines import run_plan
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark.collect import ShardReadout
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.report import default_namespace, disagreements, status_tables
from mcp_operator.benchmark.status import Collected, merged_status
from mcp_operator.cli import main
from mcp_refserver import RunningServer


def _kubeconfig(path: Path, namespace: str | None) -> Path:
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace is not None:
        context["namespace"] = namespace
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": context}],
                "current-context": "ctx",
            }
        )
    )
    return path


def test_the_current_contexts_namespace_else_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "a", "bench")))
    assert default_namespace() == "bench"
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "b", None)))
    assert default_namespace() == "default"


def test_an_unreachable_api_server_is_an_error_not_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing listens on port 1: the command says so and writes no HTML; nothing was verified
    (3, as the table every command shares says)."""
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "a", "bench")))
    html = tmp_path / "r.html"
    assert main(["report", "nothing", "-o", str(html)]) == 3
    assert "MCPBenchmark bench/nothing: cannot reach the API server" in capsys.readouterr().err
    assert not html.exists()


def test_a_missing_benchmark_is_a_usage_error_and_a_missing_report_not_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with canned_api(tmp_path / "kubeconfig", "bench") as served:
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        html = tmp_path / "r.html"
        assert main(["report", "gone", "-o", str(html)]) == 2
        assert "no MCPBenchmark bench/gone (kubectl get mcpb -n bench)" in capsys.readouterr().err
        served.objects["/apis/mcp2026.io/v1alpha1/namespaces/bench/mcpbenchmarks/running"] = {
            "apiVersion": "mcp2026.io/v1alpha1",
            "kind": "MCPBenchmark",
            "metadata": {"name": "running", "namespace": "bench"},
        }
        assert main(["report", "running", "-o", str(html)]) == 3
        err = capsys.readouterr().err
        assert "no report ConfigMap bench/running-report (the benchmark has not finished" in err
        assert not html.exists()


def test_the_status_becomes_sections_of_the_report() -> None:
    """Shards accepted and rejected and the conditions: what the figures do not say."""
    obj = {
        "metadata": {"name": "b", "namespace": "ns"},
        "status": {
            "phase": "Succeeded",
            "verdict": "Pass",
            "shards": {"expected": 3, "reported": 2, "rejected": 1},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "SloMet", "message": "all levels met"},
            ],
        },
    }
    benchmark, conditions = status_tables(obj)
    assert benchmark.title == "MCPBenchmark ns/b"
    assert ["shards rejected", "1"] in benchmark.rows and ["phase", "Succeeded"] in benchmark.rows
    assert conditions.rows == [["Ready", "True", "SloMet", "all levels met", ""]]
    assert status_tables({"metadata": {"name": "b"}})[1].rows == []  # no status yet: no rows, no error


@pytest.fixture
async def finished(refserver: RunningServer) -> Collected:
    """A two-level run against the reference server and the status the operator writes for it."""
    spec = MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://placeholder", "path": "/delay?ms=1"},
            "load": {"concurrency": [1, 2], "requests": 20},
        }
    )
    doc = await run_plan(plan_from_spec(spec, refserver.url, "bench"))
    return merged_status(
        expected=1,
        succeeded=1,
        failed=0,
        readout=ShardReadout(documents=[doc]),
        conditions=[],
        generation=1,
        now="2026-01-01T00:00:00Z",
    )


def test_a_report_that_matches_its_status_has_no_disagreement(finished: Collected) -> None:
    assert finished.merged is not None and len(finished.status["results"]) == 2
    assert disagreements(finished.merged, {"status": finished.status}) == []
    assert disagreements(finished.merged, {"status": {}}) == []  # no rows to hold it to: nothing said


def test_a_rewritten_report_is_told_apart_from_its_status_figure_by_figure(finished: Collected) -> None:
    """A Secret reader may re-sign a report, not rewrite status (issue 35, item 4): every figure
    that differs is named with both values."""
    assert finished.merged is not None
    forged = finished.merged.model_copy(deep=True)
    forged.levels[1].completed = 42
    shown = {"status": finished.status}
    (row0, row1) = finished.status["results"]
    differ = disagreements(forged, shown)
    assert f"level {row1['level']} requests: 42 in the report, {row1['requests']} in status" in differ
    assert all(d.startswith(f"level {row1['level']} ") for d in differ)  # the first level agrees
    assert not any(d.startswith(f"level {row0['level']} ") for d in differ)
    fewer = finished.merged.model_copy(deep=True)
    fewer.levels = fewer.levels[:1]
    assert disagreements(fewer, shown) == ["1 levels in the report, 2 in status"]
    relabelled = {"status": {**finished.status, "results": [row0, {**row1, "p99Ms": "0.01"}]}}
    assert any("p99Ms" in d for d in disagreements(finished.merged, relabelled))
