"""The HTML report of real results: a run against the reference server (open loop, two request
classes, SLOs, one of them missed on purpose) and a result measured on an H200 with GPU
telemetry. The page is parsed back and its tables compared with the document's own figures."""

from __future__ import annotations

import asyncio
import base64
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from mcp_bench.cli import main
from mcp_bench.diagnose import DiagnoseInputs, diagnose
from mcp_bench.engines import run_plan
from mcp_bench.htmlreport import render_html
from mcp_bench.junit import junit_xml
from mcp_bench.plan import RunPlan
from mcp_bench.plot import figure
from mcp_bench.reportfiles import install_hint
from mcp_bench.results import merge_documents
from mcp_bench.results.document import ResultDocument, dumps_document, loads_document
from mcp_refserver import RefServerConfig, start_refserver

H200 = Path(__file__).parent / "diagnose" / "fixtures" / "h200" / "instances_8_1.result.json"
PNG = b"\x89PNG\r\n\x1a\n"


class Page(HTMLParser):
    """Tables by id (rows of cell text), images, and any element by id."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[dict[str, str]] = []
        self.text_by_id: dict[str, str] = {}
        self.tags: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._id: list[tuple[str, str, list[str]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if tag == "table":
            self._table = a.get("id", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "img":
            self.images.append(a)
        if "id" in a and tag not in ("table", "img"):
            self._id.append((tag, a["id"], []))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        if self._id and self._id[-1][0] == tag:
            _, key, text = self._id.pop()
            self.text_by_id[key] = "".join(text).strip()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        for _, _, text in self._id:
            text.append(data)

    def body(self, table: str) -> list[list[str]]:
        return self.tables[table][1:]  # without the header row


def f2(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


async def _measure() -> ResultDocument:
    cfg = RefServerConfig.model_validate({"ttft_ms": 2, "tpot_ms": 1})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "payload": {
                    "max_output_tokens": 4,
                    "classes": [
                        {"name": "interactive", "weight": 1, "priority": 0},
                        {"name": "batch", "weight": 1, "priority": 10},
                    ],
                },
                "levels": {"rate": [40, 80]},
                "stage": {"requests": 40},
                # the first is missed on purpose (no request answers in a microsecond)
                "slo": {"latency_p99_ms": 0.001, "max_error_rate": 0.5},
            }
        )
        return await run_plan(plan)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[ResultDocument, Path]:
    """One real run, written and read back as ``mcp-bench run -o`` leaves it (CRC-32C checked)."""
    doc = asyncio.run(_measure())
    path = tmp_path_factory.mktemp("report") / "result.json"
    path.write_text(dumps_document(doc))
    return loads_document(path.read_text()), path


def test_the_level_table_holds_the_documents_figures(measured: tuple[ResultDocument, Path]) -> None:
    doc, _ = measured
    page = Page(render_html(doc))
    header, *rows = page.tables["levels"]
    assert header == ["Level", "P50 ms", "P95 ms", "P99 ms", "Mean ms", "Throughput/s", "OK", "Errors", "SLO"]
    assert len(rows) == 2
    for row, lv in zip(rows, doc.levels, strict=True):
        lat = lv.latency["e2e_from_schedule"]  # open loop: judged from the scheduled send
        expected = [f2(lat.p50_ms), f2(lat.p95_ms), f2(lat.p99_ms), f2(lat.mean_ms)]
        assert row[:5] == [lv.level_label, *expected]
        assert row[5] == f2(lv.throughput_rps, 1)
        assert row[6:] == [str(lv.completed), str(lv.failed + lv.dropped), "Fail"]
    assert page.text_by_id["verdict"] == "SLO missed"
    # no GPU here: one line says so (the sampler's NVML error only in its title), no zeros
    assert page.text_by_id["telemetry-note"] == "No GPU was sampled: the GPU columns and charts are left out."


def test_schedule_lag_classes_slo_findings_engine_and_checksum(measured: tuple[ResultDocument, Path]) -> None:
    doc, _ = measured
    page = Page(render_html(doc))
    for row, lv in zip(page.body("schedule"), doc.levels, strict=True):
        lag = lv.latency["schedule_lag"]
        assert row == [
            lv.level_label,
            f2(lv.requested_rate, 1),
            f2(lv.achieved_rate, 1),
            f2(lag.p50_ms, 3),
            f2(lag.p99_ms, 3),
            f2(lag.max_ms, 3),
            str(lv.late),
            str(lv.dropped),
        ]
    classes = {(r[0], r[2]): r for r in page.body("breakdown") if r[1] == "class"}
    for lv in doc.levels:
        assert lv.breakdown is not None
        for name, tag in lv.breakdown["class"].items():
            row = classes[(lv.level_label, name)]
            assert row[3:6] == [str(tag.sent), str(tag.completed), str(tag.failed)]
            assert row[8] == f2(tag.latency["e2e_from_schedule"].p99_ms)
        assert sum(t.sent for t in lv.breakdown["class"].values()) == lv.sent
    checks = [(lv.level_label, c.name, c.passed) for lv in doc.levels for c in lv.slo.checks]
    assert [(r[0], r[1], r[4] == "Pass") for r in page.body("slo")] == checks
    findings = diagnose(DiagnoseInputs(document=doc))
    assert [(r[0], r[2]) for r in page.body("findings")] == [(f.label, f.state) for f in findings]
    engine = dict(page.body("engine"))
    assert engine["server_name"] == doc.engine.server_name == "mcp-refserver"
    assert engine["client_version"] == doc.engine.client_version
    assert doc.crc32c and page.text_by_id["crc32c"] == doc.crc32c


def test_the_page_stands_alone(measured: tuple[ResultDocument, Path]) -> None:
    """Charts are inline PNGs; nothing is fetched from anywhere when the file is opened."""
    doc, _ = measured
    html = render_html(doc)
    page = Page(html)
    ids = {img["id"] for img in page.images}
    assert ids == {"chart-levels", "chart-schedule"}  # no telemetry: no telemetry chart
    for img in page.images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        assert base64.b64decode(img["src"][len(prefix) :]).startswith(PNG)
    assert "link" not in page.tags and "script" not in page.tags
    assert "http://" not in html.replace(doc.plan.url, "")  # the target is the only URL named


def test_text_from_the_document_is_escaped(measured: tuple[ResultDocument, Path]) -> None:
    doc, _ = measured
    hostile = doc.model_copy(update={"notes": ["<script>alert(1)</script>"]})
    page = Page(render_html(hostile))
    assert "script" not in page.tags
    assert page.text_by_id["notes"] == "<script>alert(1)</script>"
    with_password = doc.model_copy(update={"plan": doc.plan.model_copy(update={"url": "http://u:pw@h:1/"})})
    html = render_html(with_password)
    assert "pw@" not in html and "http://REDACTED@h:1/" in html  # a report is passed around


def test_gpu_columns_and_telemetry_over_time_from_an_h200_run() -> None:
    doc = loads_document(H200.read_text())
    page = Page(render_html(doc))
    header, *rows = page.tables["levels"]
    assert header[-4:] == ["GPU mem peak %", "SM util %", "Power W", "SLO"]
    assert isinstance(doc.levels[0].telemetry, dict)
    gpus: list[dict[str, Any]] = doc.levels[0].telemetry["gpus"]
    peak = max(g["memory_used_peak_pct"] for g in gpus)
    sm = sum(g["fields"]["sm_util_pct"]["mean"] for g in gpus) / len(gpus)
    power = sum(g["fields"]["power_w"]["mean"] for g in gpus) / len(gpus)
    assert rows[0][-4:-1] == [f2(peak, 1), f2(sm, 1), f2(power, 1)]
    assert "telemetry-note" not in page.text_by_id
    assert "chart-telemetry" in {img["id"] for img in page.images}
    overview = figure(doc)
    try:
        assert "GPU" in [ax.get_title() for ax in overview.axes]
        assert "No GPU was sampled." not in [t.get_text() for t in overview.texts]
    finally:
        plt.close(overview)
    assert page.text_by_id["crc32c"] == doc.crc32c == "3141752a"
    states = {r[0]: r[2] for r in page.body("findings")}
    assert states["trap 10"] == "Found"  # the starved instance of that run


def test_a_merged_document_charts_every_shards_gpus() -> None:
    """Two measured runs merged as two shards: the telemetry chart draws each shard's series and
    the table reads the merged summaries."""
    from mcp_bench.htmlreport.charts import _series

    fixtures = H200.parent
    shards = [
        loads_document((fixtures / name).read_text()).model_copy(update={"shard_index": i, "shards": 2})
        for i, name in enumerate(("instances_8_1.result.json", "instances_1_1.result.json"))
    ]
    merged = merge_documents(shards)
    assert isinstance(merged.telemetry, dict)
    assert [label for label, _, _ in _series(merged.telemetry["plot"])] == ["shard 0 GPU 0", "shard 1 GPU 0"]
    page = Page(render_html(merged))
    assert "chart-telemetry" in {img["id"] for img in page.images}
    header, row = page.tables["levels"]
    assert row[0] == merged.levels[0].level_label
    assert row[header.index("OK")] == str(shards[0].levels[0].completed + shards[1].levels[0].completed)
    assert row[header.index("GPU mem peak %")] != "unavailable"
    assert page.text_by_id["crc32c"] == loads_document(dumps_document(merged)).crc32c  # as written out


def test_junit_has_one_testcase_per_slo_judgement(measured: tuple[ResultDocument, Path]) -> None:
    doc, _ = measured
    suite = ET.fromstring(junit_xml(doc)).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    checks = [(lv, c) for lv in doc.levels for c in lv.slo.checks]
    names = [(lv.level_label, c.name) for lv, c in checks]
    assert [(c.get("classname"), c.get("name")) for c in cases] == names
    for case, (_, check) in zip(cases, checks, strict=True):
        assert (case.find("failure") is None) == check.passed
    assert suite.get("failures") == str(sum(not c.passed for _, c in checks)) != "0"
    no_slo = loads_document(H200.read_text())
    skipped = ET.fromstring(junit_xml(no_slo)).find("testsuite")
    assert skipped is not None and skipped.get("skipped") == "1"


def test_cli_report_writes_html_and_junit(measured: tuple[ResultDocument, Path], tmp_path: Path) -> None:
    doc, path = measured
    html, junit = tmp_path / "r.html", tmp_path / "r.xml"
    assert main(["report", str(path), "-o", str(html), "--junit", str(junit)]) == 0
    assert Page(html.read_text()).text_by_id["crc32c"] == doc.crc32c
    assert ET.parse(junit).getroot().get("tests") == str(sum(len(lv.slo.checks) for lv in doc.levels))
    assert main(["report", str(path), "-o", str(html), "--check"]) == 1  # an SLO was missed
    bad = tmp_path / "bad.json"
    bad.write_text(path.read_text().replace('"completed":', '"completed":1', 1))
    assert main(["report", str(bad), "-o", str(tmp_path / "bad.html")]) == 2
    assert not (tmp_path / "bad.html").exists()


def test_cli_report_without_the_plot_extra_says_how_to_get_it(
    measured: tuple[ResultDocument, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Jinja2 is in the ``plot`` extra with matplotlib: without it the command writes the JUnit
    XML, says in one line what to install, exit 2."""
    doc, path = measured
    for name in [m for m in sys.modules if m.startswith("mcp_bench.htmlreport")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "jinja2", None)  # import fails as if not installed
    html, junit = tmp_path / "r.html", tmp_path / "r.xml"
    assert main(["report", str(path), "-o", str(html), "--junit", str(junit)]) == 2
    out, err = capsys.readouterr()
    assert f"wrote {junit}" in out and "Traceback" not in err
    assert f"the plot extra (Jinja2, matplotlib): {install_hint()}" in err
    assert not html.exists()
    assert ET.parse(junit).getroot().get("tests") == str(sum(len(lv.slo.checks) for lv in doc.levels))


def test_the_install_hint_names_the_checkout_it_runs_from(tmp_path: Path) -> None:
    """Installed from a checkout (``make demo``: ``pip install -e .``) the extra comes from it."""
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    assert install_hint(tmp_path, cwd=tmp_path) == "pip install -e '.[plot]'"
    assert install_hint(tmp_path, cwd=tmp_path / "elsewhere") == f"pip install -e '{tmp_path}[plot]'"
    assert install_hint(tmp_path / "site-packages") == "pip install 'mcp-operator[plot]'"
