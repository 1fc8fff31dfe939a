"""``mcp-check`` as CI runs it: a real process against the reference server (a real process
too), exit codes, JSON rows, JUnit XML, and the same checks from a manifest file."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import stack
from mcp_devcluster.processes import free_port

pytestmark = pytest.mark.timing  # run under load by `make test-stress`


@pytest.fixture(scope="module")
def refserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = stack.start_refserver(tmp_path_factory.mktemp("refserver"))
    try:
        yield url
    finally:
        stack.stop(proc)


def _check(*argv: str) -> tuple[int, dict[str, Any] | None, str]:
    result = subprocess.run(
        [sys.executable, "-m", "mcp_checks.cli", *argv], capture_output=True, text=True, timeout=120
    )
    data = json.loads(result.stdout) if "--json" in argv and result.stdout.strip() else None
    return result.returncode, data, result.stderr


def _manifest(tmp_path: Path, url: str, checks: dict[str, Any]) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "mcp2026.io/v1alpha1",
                "kind": "MCPReadiness",
                "metadata": {"name": "gate", "namespace": "ml"},
                "spec": {"target": {"url": url}, "checks": checks},
            }
        )
    )
    return path


def test_health_flags_pass_with_exit_0(refserver: str) -> None:
    code, data, err = _check(
        "health", "--url", refserver, "--requests", "200", "--min-success-ratio", "0.99", "--json"
    )
    assert data is not None, err
    row = data["checks"][0]
    if (code, row["outcome"], row["reason"]) == (3, "Inconclusive", "ProberOverloaded"):
        return  # a busy host lagged the prober itself past its limit, and the round said so
    assert code == 0, err
    assert data["verdict"] == "Pass"
    assert row["observed"]["succeeded"] == "200"


def test_unreachable_is_exit_3_never_a_pass() -> None:
    code, data, _ = _check("health", "--url", f"http://127.0.0.1:{free_port()}", "--requests", "20", "--json")
    assert code == 3
    assert data is not None and data["checks"][0]["reason"] == "TargetUnreachable"


def test_a_failing_check_is_exit_1_and_a_junit_failure(refserver: str, tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    code, _, _ = _check(
        "health",
        "--url",
        refserver,
        "--path",
        "/delay?ms=20",
        "--requests",
        "40",
        "--min-success-ratio",
        "0.9",
        "--max-p99-ms",
        "1",
        "--junit",
        str(junit),
    )
    suite = ET.parse(junit).getroot()
    if code == 3:  # the prober itself lagged (a busy host): it says so rather than blame the target
        error = suite.find("testcase/error")
        # an error's type is the outcome, its message starts with the reason
        assert error is not None and error.get("type") == "Inconclusive", ET.tostring(suite)
        assert (error.get("message") or "").startswith("ProberOverloaded: "), ET.tostring(suite)
        return
    assert code == 1
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "1", "0")
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("type") == "LatencyAboveThreshold"


def test_all_runs_every_check_of_a_manifest_concurrently(refserver: str, tmp_path: Path) -> None:
    """Two checks, one of them against a Prometheus that is not there: both rows come back,
    the unreachable one Inconclusive and naming its source, and the run is not a pass."""
    prometheus = f"http://127.0.0.1:{free_port()}"
    path = _manifest(
        tmp_path,
        refserver,
        {
            "healthProbe": {"requests": 100, "minSuccessRatio": 0.99},
            "metricDrift": {
                "prometheusUrl": prometheus,
                "rules": [{"record": "job:up:sum"}],
                "timeoutSeconds": 2,
            },
        },
    )
    junit = tmp_path / "all.xml"
    code, data, err = _check("all", "-f", str(path), "--json", "--junit", str(junit))
    assert code == 3, err
    assert data is not None
    rows = {row["name"]: row for row in data["checks"]}
    health = rows["health-probe"]
    # on a busy host the prober's own loop can lag past its limit while a round sees a breach:
    # the round then says so (ProberOverloaded) instead of a Pass or Fail it has no evidence for
    overloaded = (health["outcome"], health["reason"]) == ("Inconclusive", "ProberOverloaded")
    assert health["outcome"] == "Pass" or overloaded, health
    assert rows["metric-drift"]["outcome"] == "Inconclusive"
    assert rows["metric-drift"]["reason"] == "PrometheusUnreachable"
    assert ET.parse(junit).getroot().get("errors") == ("2" if overloaded else "1")


def test_a_subcommand_with_a_manifest_runs_only_its_check(refserver: str, tmp_path: Path) -> None:
    path = _manifest(
        tmp_path,
        refserver,
        {
            "healthProbe": {"requests": 100, "minSuccessRatio": 0.99},
            "xdsSync": {
                "sources": [{"kind": "csds", "address": f"127.0.0.1:{free_port()}"}],
                "timeoutSeconds": 1,
            },
        },
    )
    code, data, _ = _check("xds", "-f", str(path), "--json")
    assert code == 3  # no source answers: Inconclusive, never Pass
    assert data is not None and [row["name"] for row in data["checks"]] == ["xds-sync"]
    assert data["checks"][0]["reason"] == "SourceUnreachable"
    code, data, _ = _check("health", "-f", str(path), "--json")
    assert code == 0 and data is not None and [row["name"] for row in data["checks"]] == ["health-probe"]


@pytest.mark.parametrize(
    "argv",
    [
        ["all"],  # all needs a manifest
        ["health"],  # no URL anywhere
        ["drift", "--rule", "x"],  # no Prometheus
        ["config", "--configmap", "c"],  # no workload
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    code, _, err = _check(*argv)
    assert code == 2 and err.startswith(("mcp-check:", "usage:"))


def test_unknown_check_in_a_manifest_is_a_usage_error(tmp_path: Path) -> None:
    path = _manifest(tmp_path, "http://127.0.0.1:1", {"chaosMonkey": {}})
    code, _, err = _check("all", "-f", str(path))
    assert code == 2 and "chaosMonkey" in err


def test_a_drill_manifest_runs_its_checks_and_says_what_it_skipped(refserver: str, tmp_path: Path) -> None:
    """The repo's drill sample: its health probe runs, and stderr names spec.drill (staged load
    and faults are the operator's) instead of dropping it silently."""
    sample = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "mcpreadiness-drill.yaml"
    path = tmp_path / "drill.yaml"
    path.write_text(stack.render_sample(sample.read_text(), refserver))
    code, data, err = _check("all", "-f", str(path), "--json")
    assert code == 0, err
    assert data is not None and [row["name"] for row in data["checks"]] == ["health-probe"]
    assert "skipped spec.drill: staged load and faults need the operator" in err
    # a manifest with checks only skips nothing
    plain = _manifest(tmp_path, refserver, {"healthProbe": {"requests": 20}})
    assert "skipped" not in _check("all", "-f", str(plain))[2]
