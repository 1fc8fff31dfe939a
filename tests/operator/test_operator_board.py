"""``kubectl mcp board``: the board of a drill built by the operator's own status builders, its
exit codes, and the plugin read through a kubeconfig against a small HTTP API (no cluster)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tests.operator.cannedapi import CannedApi, canned_api
from tests.operator.drillstatus import (
    benchmark_object,
    drill_object,
    evaluating_object,
    readiness_object,
)

from mcp_checks.cli import main as mcp_checks_main
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_operator.board import command
from mcp_operator.board.codes import object_code as exit_code
from mcp_operator.board.read import BENCHMARK, READINESS, ReadError, read_object
from mcp_operator.board.render import board_text, shown_verdict
from mcp_operator.readiness.status import verdict_status

REPO = Path(__file__).resolve().parents[2]


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def _row(text: str, first: str) -> str:
    """The board's line that starts with ``first`` (cells joined by single spaces)."""
    return next(line for line in _lines(text) if line.startswith(first))


# --- the board of an MCPReadiness ---


def test_a_passing_drill_shows_verdict_kpis_stages_and_faults() -> None:
    obj = drill_object()
    text = board_text(obj, width=160)
    assert _row(text, "Verdict") == (
        "Verdict Pass · Ready True (ChecksPassed) · Score 100 % · Phase Succeeded · Stage 3/3"
    )
    assert "faults reverted True" in text
    assert _row(text, "healthSuccessRatio").endswith(">= 99.9900% - ✓ Pass -")
    assert _row(text, "recoverySeconds mixed-0") == (
        "recoverySeconds mixed-0 2.50 s <= 17 s - ✓ Pass scaleDown mixed-0 in mixed"
    )
    assert _row(text, "baseline") == "baseline Done 250 req/s 250.0 req/s 4.00 ms 12.00 ms - 0 0"
    assert _row(text, "spike") == "spike Done 4480 req/s 4480.0 req/s 10.00 ms 30.00 ms - 0 0"
    assert _row(text, "mixed-0") == (
        "mixed-0 scaleDown mixed Deployment/srv 3 -> 1 replicas Reverted 12:00:35Z 12:00:45Z 10.0 s 2.50 s ✓"
    )
    # the KPI rows of the verdict table are the KPI table's: Checks has the other checks only
    assert _row(text, "health-probe") == (
        "health-probe requests=100, p99=3.1 ms minSuccessRatio=0.99, maxP99Ms=250 Pass HealthMet"
    )
    assert not any(line.startswith("kpi:") for line in _lines(text))
    assert exit_code(obj) == 0


def test_a_failing_drill_shows_what_failed_and_exits_1() -> None:
    obj = drill_object(failing=True)
    text = board_text(obj, width=200)
    assert _row(text, "Verdict").startswith("Verdict Fail · Ready False (HealthBelowThreshold) · Score 50 %")
    assert "faults reverted False" in text
    assert _row(text, "recoverySeconds mixed-1").startswith("recoverySeconds mixed-1 never, within the drill")
    assert "✗ Fail" in _row(text, "recoverySeconds mixed-1")
    assert "! Warn" in _row(text, "p99JumpPoint")
    assert _row(text, "spike") == "spike Done 4480 req/s 4480.0 req/s 10.00 ms 240.00 ms at 22.5 s 900 0"
    assert _row(text, "mixed-1") == (
        "mixed-1 podKill mixed Pod/srv-abc RevertFailed 12:00:50Z - - never, within the drill ✗"
    )
    assert exit_code(obj) == 1


def test_an_evaluation_in_progress_reads_evaluating_with_the_last_verdict_beside_it() -> None:
    obj = evaluating_object()
    assert shown_verdict(obj) == "Evaluating"
    text = board_text(obj, width=160)
    assert _row(text, "Verdict") == (
        "Verdict Evaluating · last Pass · Ready Unknown (Evaluating) · Phase Running · Stage 2/3"
    )
    assert "generation 2, status is of generation 1" in text
    assert "completed" not in text  # the previous round's end is not this one's
    assert _row(text, "mixed") == "mixed Running 1600 req/s - - - - - -"
    assert exit_code(obj) == 3  # nothing verified yet: not a Fail


def test_a_gate_without_a_drill_shows_its_checks_only() -> None:
    rows = [
        CheckOutcome("health-probe", Verdict.PASS, "HealthMet", "ok", {"p99": "3 ms"}, {"maxP99Ms": "250"}),
        CheckOutcome("xds-sync", Verdict.WARN, "ProxiesLagging", "1 of 3 late", {"stale": "1"}),
    ]
    status, _ = verdict_status({}, 1, "http://svc:8000", "2026-05-01T12:00:00Z", rows, "2026-05-01T12:00:05Z")
    obj = readiness_object("plain", status)
    text = board_text(obj, width=160)
    head = _row(text, "Verdict")
    assert head.startswith("Verdict Warn · Ready True (ChecksPassedWithWarnings) · Score 50 %")
    assert _row(text, "xds-sync") == "xds-sync stale=1 - Warn ProxiesLagging"
    assert not any(title in _lines(text) for title in ("KPIs", "Stages", "Faults"))
    assert exit_code(obj) == 0  # Warn is Ready, as for mcp-check gate


def test_a_new_object_has_no_rows_yet() -> None:
    obj = {"kind": "MCPReadiness", "metadata": {"name": "n", "namespace": "d", "generation": 1}}
    text = board_text(obj)
    assert "Verdict Pending" in text and "nothing has been measured" in text
    assert exit_code(obj) == 3


@pytest.mark.parametrize(("verdict", "code"), [("Fail", 1), ("Inconclusive", 3), ("Error", 3), ("Pass", 3)])
def test_a_drill_not_ready_exits_with_its_verdicts_code(verdict: str, code: int) -> None:
    """The table every kubectl mcp command shares: 1 only for a Fail, 3 for what verified nothing;
    never 0 while Ready is not True, whatever the verdict says."""
    obj = drill_object(failing=True)
    obj["status"]["verdict"] = verdict
    assert exit_code(obj) == code


def test_a_verdict_of_an_older_generation_is_not_a_pass() -> None:
    obj = drill_object()
    obj["metadata"]["generation"] = 2  # the spec changed; the operator has not taken it up yet
    assert exit_code(obj) == 3
    failed = drill_object(failing=True)
    failed["metadata"]["generation"] = 2  # nor a Fail: that verdict was of the older spec
    assert exit_code(failed) == 3


# --- the board of an MCPBenchmark ---


def test_a_benchmark_board_shows_levels_shards_and_found_traps() -> None:
    obj = benchmark_object()
    text = board_text(obj, width=160)
    assert _row(text, "Verdict") == (
        "Verdict Pass · Ready True (SloMet) · Phase Succeeded · Shards 2/2 (1 rejected) · P99 41.20 ms "
        "· Throughput 398.5 req/s"
    )
    assert _row(text, "c=16") == "c=16 7970 30 398.5 17.00 ms 41.20 ms Pass"
    assert _row(text, "queueing").startswith("queueing c=16 P99 grows 2x")
    assert "cold-start" not in text  # NotFound: not a finding
    assert exit_code(obj) == 0
    assert exit_code(benchmark_object(slo_met=False)) == 1


def test_a_running_benchmark_shows_its_progress() -> None:
    obj = benchmark_object()
    obj["status"].update(
        phase="Running",
        progress={"level": "2/4", "sent": 900, "errors": 2, "rateRps": "180.0", "etaSeconds": 42},
        conditions=[{"type": "Ready", "status": "Unknown", "reason": "Running", "message": "waiting"}],
    )
    text = board_text(obj, width=160)
    assert _row(text, "Level") == "Level 2/4 · sent 900 · errors 2 · rate 180.0 req/s · ETA 42 s"
    assert exit_code(obj) == 3


# --- the command ---


Read = list[tuple[str, str, str]]


def _run(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], obj: dict[str, Any] | Exception
) -> tuple[int, str, Read]:
    """The command with ``obj`` as what the API answers: its code, its output, what it read."""
    seen: Read = []

    def read(kind: Any, name: str, namespace: str, *_: Any) -> dict[str, Any]:
        seen.append((kind.name, name, namespace))
        if isinstance(obj, Exception):
            raise obj
        return obj

    monkeypatch.setattr(command, "read_object", read)
    monkeypatch.setattr("mcp_operator.benchmark.report.default_namespace", lambda: "current")
    out = io.StringIO()
    code = command.board_main(argv, Console(file=out, width=160, color_system=None))
    return code, out.getvalue(), seen


def test_the_command_reads_the_kind_and_namespace_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, seen = _run(monkeypatch, ["mcp2026"], drill_object())
    assert code == 0 and "recoverySeconds mixed-0" in out
    assert seen == [("MCPReadiness", "mcp2026", "current")]
    failed = benchmark_object(slo_met=False)
    code, out, seen = _run(monkeypatch, ["bench", "-n", "perf", "--kind", "mcpb"], failed)
    assert code == 1 and "c=16" in out and seen == [("MCPBenchmark", "bench", "perf")]
    code, _, seen = _run(monkeypatch, ["mcpbenchmark/bench"], benchmark_object())
    assert code == 0 and seen == [("MCPBenchmark", "bench", "current")]


def test_not_found_is_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    missing = ReadError("MCPReadiness current/gone not found", missing=True)
    code, out, _ = _run(monkeypatch, ["gone"], missing)
    assert code == 2 and out == ""
    assert "kubectl mcp board: MCPReadiness current/gone not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [[], ["x", "--kind", "pods"], ["pods/x"], ["mcpr/x", "--kind", "mcpb"], ["mcpr/"], ["a", "b"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        command.board_main(argv)
    assert exited.value.code == 2
    assert "usage: kubectl mcp board" in capsys.readouterr().err


def test_other_subcommands_are_mcp_checks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        command.kubectl_main(["gate", "--help"])
    assert exited.value.code == 0 and "usage: kubectl mcp gate" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        command.kubectl_main(["--help"])
    out = capsys.readouterr().out
    # board is listed with the subcommands, not after them
    assert exited.value.code == 0 and "usage: kubectl mcp [-h] {board,gate,health," in out
    assert _lines(out.split("positional arguments:", 1)[1])[2].startswith("board NAME [-n NS]")
    with pytest.raises(SystemExit) as exited:
        mcp_checks_main(["--help"])
    assert "usage: mcp-check [-h] {gate,health," in capsys.readouterr().out  # mcp-check has no board


def test_the_plugin_executable_is_this_command() -> None:
    """pyproject's kubectl-mcp is the dispatcher (kubectl finds the plugin by that name on PATH)."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-mcp"] == "mcp_operator.board.command:kubectl_main"
    shown = subprocess.run(
        [sys.executable, "-m", "mcp_operator.board.command", "board", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0 and "usage: kubectl mcp board" in shown.stdout


# --- reading through a kubeconfig, as kubectl does ---


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[CannedApi]]:
    with canned_api(tmp_path / "kubeconfig") as served:
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        yield served


def test_the_object_is_read_from_the_kubeconfigs_cluster(api: type[CannedApi]) -> None:
    api.objects["/apis/mcp2026.io/v1alpha1/namespaces/demo/mcpreadinesses/mcp2026"] = drill_object()
    assert read_object(READINESS, "mcp2026", "demo")["status"]["verdict"] == "Pass"
    with pytest.raises(ReadError) as missing:
        read_object(BENCHMARK, "mcp2026", "demo")
    assert missing.value.missing and "MCPBenchmark demo/mcp2026 not found" in str(missing.value)


def test_the_plugin_process_prints_the_board_and_exits_with_its_code(api: type[CannedApi]) -> None:
    api.objects["/apis/mcp2026.io/v1alpha1/namespaces/demo/mcpreadinesses/bad"] = drill_object(failing=True)
    done = subprocess.run(
        [sys.executable, "-m", "mcp_operator.board.command", "board", "bad"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert done.returncode == 1, done.stderr
    assert "Verdict Fail" in " ".join(done.stdout.split()) and "RevertFailed" in done.stdout
    gone = subprocess.run(
        [sys.executable, "-m", "mcp_operator.board.command", "board", "gone", "-n", "other"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gone.returncode == 2 and "MCPReadiness other/gone not found" in gone.stderr
