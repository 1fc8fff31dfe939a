"""JUnit XML of a check run: each testcase and the testsuite carry ``time`` (seconds), as CI
systems read it; the suite's time is the run's wall time where measured."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

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
