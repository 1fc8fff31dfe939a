"""JUnit XML of a check run: each testcase and the testsuite carry ``time`` (seconds), as CI
systems read it; from ``mcp-check`` the suite's time is the run's wall time, from the gate the
operator's evaluation (``startedAt`` to ``completedAt``)."""

from __future__ import annotations

import argparse
import io
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_checks.gate import command, judge
from mcp_checks.junit import junit_xml, write_junit
from mcp_checks.verdict import CheckOutcome, Verdict


def _rows() -> list[CheckOutcome]:
    return [
        CheckOutcome("health-probe", Verdict.PASS, "ChecksPassed", "ok", duration_s=1.23456),
        CheckOutcome("xds-sync", Verdict.FAIL, "ProxyNacked", "a NACK", duration_s=0.5),
        CheckOutcome("metric-drift", Verdict.INCONCLUSIVE, "PrometheusUnreachable", "no answer"),
    ]


def _times(xml: str) -> tuple[str | None, dict[str, str | None]]:
    root = ET.fromstring(xml)
    return root.get("time"), {case.get("name", ""): case.get("time") for case in root.iter("testcase")}


def test_every_testcase_and_the_suite_have_a_time() -> None:
    suite, cases = _times(junit_xml(_rows()))
    assert cases == {"health-probe": "1.235", "xds-sync": "0.500", "metric-drift": "0.000"}
    assert suite == "1.735"  # no wall time given: the sum of the cases'


def test_the_suite_time_is_the_wall_time_when_measured(tmp_path: Path) -> None:
    """The checks run concurrently: the run took less than the sum of its checks."""
    path = tmp_path / "report.xml"
    write_junit(_rows(), path, elapsed_s=1.3)
    suite, cases = _times(path.read_text(encoding="utf-8"))
    assert suite == "1.300" and cases["health-probe"] == "1.235"
    root = ET.parse(path).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")


class _Once:
    """The gate's source: one completed evaluation, read at once."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj

    def get(self) -> dict[str, Any]:
        return self.obj

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Any]]:
        return iter(())


AT = {"measuredAt": "2026-05-01T12:00:04Z"}  # every row has it (the CRD requires it)


def test_the_gate_report_has_the_rows_times_and_the_evaluations(tmp_path: Path) -> None:
    obj = {
        "metadata": {"name": "g", "generation": 1, "resourceVersion": "1"},
        "spec": {},
        "status": {
            "observedGeneration": 1,
            "phase": "Succeeded",
            "verdict": "Pass",
            "release": {
                "revision": "r1",
                "trigger": "Spec",
                "generation": 1,
                "startedAt": "2026-05-01T12:00:00.250Z",
                "completedAt": "2026-05-01T12:00:04.000Z",
            },
            "checks": [
                {
                    **AT,
                    "name": "health-probe",
                    "verdict": "Pass",
                    "reason": "ChecksPassed",
                    "durationMs": 3500,
                },
                {"name": "xds-sync", "verdict": "Pass", "reason": "ProxiesSynced", "durationMs": 20, **AT},
            ],
        },
    }
    report = tmp_path / "gate.xml"
    args = argparse.Namespace(
        resource="g", timeout=5.0, release="r1", since=None, namespace="ns", kubeconfig=None, context=None
    )
    args.junit = report
    assert command.run(args, source=_Once(obj), out=io.StringIO()) == 0
    suite, cases = _times(report.read_text(encoding="utf-8"))
    assert cases == {"health-probe": "3.500", "xds-sync": "0.020"}
    assert suite == "3.750"  # startedAt to completedAt


def test_a_gate_timeout_row_takes_the_wait() -> None:
    decision = judge.timed_out(None, judge.Wanted(release="r2"), 2.5)
    suite, cases = _times(junit_xml(decision.outcomes, suite="mcpreadiness/g"))
    assert cases == {"gate": "2.500"} and suite == "2.500"
