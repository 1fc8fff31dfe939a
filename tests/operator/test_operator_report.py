"""``mcp-operator report NAME --kind mcpr``: a drill's HTML report from the object alone (the
status built by the operator's own builders), its timeline, and the command's paths."""

from __future__ import annotations

import base64
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from tests.operator.drillstatus import drill_object, evaluating_object, readiness_object

from mcp_bench.reportfiles import MissingExtraError
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_operator import report
from mcp_operator.board import read
from mcp_operator.board.marks import EMOJI
from mcp_operator.board.status import readiness
from mcp_operator.cli import main
from mcp_operator.readiness.status import verdict_status


def _timeline(obj: dict[str, Any]) -> report.Timeline | None:
    """The timeline of an object's status, read as the report reads it."""
    return report.timeline(readiness(obj).status)


def _table(page: str, table_id: str) -> list[list[str]]:
    """A table's body rows by id, as cell texts."""
    body = page.split(f'<table id="{table_id}"', 1)[1].split("</table>", 1)[0].split("<tbody>", 1)[1]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in body.split("<tr>")[1:]]


def test_the_timeline_lays_out_the_plan_and_marks_the_faults_as_held() -> None:
    line = _timeline(drill_object(failing=True))
    assert line is not None
    # MCP2026 at scale 0.5: 30 s, 30 s, 45 s, back to back
    assert [(s.name, s.start_s, s.end_s) for s in line.stages] == [
        ("baseline", 0.0, 30.0),
        ("mixed", 30.0, 60.0),
        ("spike", 60.0, 105.0),
    ]
    assert [(s.p99_ms, s.errors) for s in line.stages] == [(12.0, 0), (18.0, 3), (240.0, 900)]
    assert line.stages[2].jump_s == 60.0 + 22.5  # the stage's start plus where its P99 jumped
    held, failed = line.faults
    # the scaleDown at 5 s into mixed, held 10 s by the journal; the podKill at 20 s, never reverted
    assert (held.id, held.injected_s, held.reverted_s) == ("mixed-0", 35.0, 45.0)
    assert (failed.id, failed.phase) == ("mixed-1", "RevertFailed")
    assert (failed.injected_s, failed.reverted_s) == (50.0, None)


def test_the_timeline_draws_each_stage_window_by_window() -> None:
    line = _timeline(drill_object(failing=True))
    assert line is not None
    for span in line.stages:
        # two windows a stage, back to back from the stage's start to its end
        assert span.windows[0].start_s == span.start_s and span.windows[-1].end_s == span.end_s
        assert all(a.end_s == b.start_s for a, b in zip(span.windows, span.windows[1:], strict=False))
        assert sum(w.errors for w in span.windows) == span.errors
    spike = line.stages[2]
    assert [w.p99_ms for w in spike.windows] == [30.0, 240.0]  # calm, then the jump (at 22.5 s)
    assert spike.windows[1].start_s == spike.jump_s
    assert report.timeline_chart(line) is not None


def test_a_stage_without_windows_is_drawn_per_stage() -> None:
    """A status an older operator wrote: no windows, the stage's figures alone."""
    obj = drill_object(failing=True)
    for row in obj["status"]["stages"]:
        row.pop("windows", None)
    line = _timeline(obj)
    assert line is not None and all(not s.windows for s in line.stages)
    assert report.timeline_chart(line) is not None


def _legend(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_the_legend_names_faults_only_where_the_drill_had_some() -> None:
    import matplotlib.pyplot as plt

    with_faults = _timeline(drill_object(failing=True))
    assert with_faults is not None
    fig = report.timeline_figure(with_faults)
    assert fig is not None
    try:
        assert {"fault held (injected: red line)", "fault reverted"} <= set(_legend(fig))
        assert fig.get_suptitle() == "drill timeline"
    finally:
        plt.close(fig)
    obj = drill_object()
    obj["status"]["faults"] = []
    quiet = _timeline(obj)
    assert quiet is not None and quiet.faults == []
    fig = report.timeline_figure(quiet)
    assert fig is not None
    try:
        assert not [label for label in _legend(fig) if "fault" in label]
        assert fig.get_suptitle() == "drill timeline (no faults)"
    finally:
        plt.close(fig)
    page = report.render_readiness_html(obj)
    note = page.split('id="timeline-note">', 1)[1].split("</p>", 1)[0]
    assert "fault" not in note
    assert "fault" in report.render_readiness_html(drill_object()).split('id="timeline-note">', 1)[1]


def test_a_fault_never_injected_is_listed_but_not_placed() -> None:
    obj = drill_object()
    obj["status"]["faults"].append(
        {"id": "spike-0", "stage": "spike", "kind": "nodeDrain", "target": "", "phase": "Skipped"}
    )
    line = _timeline(obj)
    assert line is not None and line.faults[-1].injected_s is None
    page = report.render_readiness_html(obj)
    assert _table(page, "faults")[-1][:5] == ["spike-0", "nodeDrain", "spike", "-", "Skipped"]


def test_the_page_has_the_verdict_the_timeline_and_the_boards_rows() -> None:
    page = report.render_readiness_html(drill_object(failing=True))
    assert '<span id="verdict" class="verdict Fail">Fail</span>' in page
    assert "border-collapse" in page  # mcp-bench report's style
    chart = re.search(r'id="chart-timeline"[^>]*\s+src="data:image/png;base64,([^"]+)"', page)
    assert chart is not None and base64.b64decode(chart.group(1)).startswith(b"\x89PNG")
    kpis = {row[0]: row for row in _table(page, "kpis")}
    assert kpis["recoverySeconds mixed-1"][1:5] == ["never, within the drill", "&lt;= 17 s", "-", "Fail"]
    assert '<td class="Fail">Fail</td>' in page  # its mark drawn by CSS: no emoji font needed
    assert not EMOJI.search(page.split("<body>", 1)[1])
    assert [row[0] for row in _table(page, "checks")] == ["health-probe"]
    assert _table(page, "stages")[2][5:7] == ["240.00 ms", "at 22.5 s"]
    faults = {row[0]: row for row in _table(page, "faults")}
    assert faults["mixed-0"][4:8] == ["Reverted", "12:00:35Z", "12:00:45Z", "10.0 s"]
    assert faults["mixed-1"][4] == "RevertFailed" and faults["mixed-1"][-1] == "ApiException: 503"
    assert [row[1] for row in _table(page, "history")] == ["Fail"]
    assert {row[0] for row in _table(page, "conditions")} >= {"Ready", "FaultsReverted", "Complete"}


def test_an_evaluation_in_progress_is_evaluating() -> None:
    page = report.render_readiness_html(evaluating_object())
    assert '<span id="verdict" class="verdict Evaluating">Evaluating</span>' in page
    assert [row[1] for row in _table(page, "stages")] == ["Done", "Running", "Pending"]


def test_a_gate_without_a_drill_has_no_timeline_and_text_is_escaped() -> None:
    leak = {"body": "<script>x</script>"}
    rows = [CheckOutcome("health-probe", Verdict.FAIL, "HealthBelowThreshold", "m", leak)]
    status, _ = verdict_status({}, 1, "http://svc:8000", "2026-05-01T12:00:00Z", rows, "2026-05-01T12:00:05Z")
    obj = readiness_object("plain", status)
    assert _timeline(obj) is None
    page = report.render_readiness_html(obj)
    assert "chart-timeline" not in page and "<script>" not in page
    assert _table(page, "checks")[0][1] == "body=&lt;script&gt;x&lt;/script&gt;"
    assert 'id="kpis"' not in page and 'id="faults"' not in page  # no empty tables


def test_junit_carries_the_check_rows(tmp_path: Path) -> None:
    html, junit = tmp_path / "r.html", tmp_path / "r.xml"
    assert report.write_readiness_report(drill_object(failing=True), html, junit) == [html, junit]
    suite = ET.parse(junit).getroot()
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert failed == {"kpi:healthSuccessRatio", "kpi:recoverySeconds:mixed-1"}


def test_without_the_plot_extra_only_the_junit_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As after ``make demo`` without the extra: JUnit needs no plotting library, the page does."""
    monkeypatch.setitem(sys.modules, "jinja2", None)  # import jinja2 fails as when not installed
    html, junit = tmp_path / "r.html", tmp_path / "r.xml"
    with pytest.raises(MissingExtraError, match=r"pip install -e '.*\[plot\]'") as missing:
        report.write_readiness_report(drill_object(failing=True), html, junit)
    assert missing.value.written == [junit] and not html.exists()
    assert len(list(ET.parse(junit).getroot().iter("testcase"))) > 0


# --- the command ---


def _serve(monkeypatch: pytest.MonkeyPatch, obj: dict[str, Any] | Exception) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = []

    def read_object(kind: read.Kind, name: str, namespace: str) -> dict[str, Any]:
        seen.append((kind.name, name, namespace))
        if isinstance(obj, Exception):
            raise obj
        return obj

    monkeypatch.setattr(read, "read_object", read_object)
    monkeypatch.setattr("mcp_operator.benchmark.report.default_namespace", lambda: "current")
    return seen


def test_report_kind_mcpr_writes_the_drill_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _serve(monkeypatch, drill_object())
    html = tmp_path / "drill.html"
    assert main(["report", "mcp2026", "--kind", "mcpr", "-n", "demo", "-o", str(html)]) == 0
    assert seen == [("MCPReadiness", "mcp2026", "demo")]
    assert f"wrote {html}" in capsys.readouterr().out
    assert 'id="chart-timeline"' in html.read_text(encoding="utf-8")


def test_report_of_a_missing_mcpreadiness_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _serve(monkeypatch, read.ReadError("MCPReadiness current/gone not found", missing=True))
    html = tmp_path / "gone.html"
    assert main(["report", "gone", "--kind", "mcpreadiness", "-o", str(html)]) == 2
    assert "mcp-operator report: MCPReadiness current/gone not found" in capsys.readouterr().err
    assert not html.exists()


def test_report_without_matplotlib_writes_junit_and_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _serve(monkeypatch, drill_object(failing=True))
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # as when matplotlib is not installed
    html, junit = tmp_path / "drill.html", tmp_path / "drill.xml"
    code = main(["report", "d", "--kind", "mcpr", "-o", str(html), "--junit", str(junit)])
    out, err = capsys.readouterr()
    assert code == 2 and out == f"wrote {junit}\n" and not html.exists()
    assert err.count("\n") == 1 and "Traceback" not in err  # one line, no traceback
    assert err.startswith("mcp-operator report: the HTML report needs the plot extra")
    assert "pip install -e '" in err and "[plot]'" in err
    assert ET.parse(junit).getroot().find(".//failure") is not None


def test_report_kind_must_be_one_of_the_two(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", "x", "--kind", "pods"])
    assert exited.value.code == 2 and "mcpr (MCPReadiness) or mcpb (MCPBenchmark)" in capsys.readouterr().err
