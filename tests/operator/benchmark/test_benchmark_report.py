"""``mcp-operator report`` picks the namespace as kubectl does: the kubeconfig's current context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.operator.cannedapi import canned_api

from mcp_operator.benchmark.report import default_namespace, status_tables
from mcp_operator.cli import main


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
