from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_bench.cli import main
from mcp_bench.engines import run_plan_sync
from mcp_bench.plan import RunPlan
from mcp_bench.plot import figure, plot_result
from mcp_bench.results.document import dumps_document

PNG = b"\x89PNG\r\n\x1a\n"


def _doc(url: str):  # type: ignore[no-untyped-def]
    plan = RunPlan.from_dict(
        {"url": url + "/sleep/2", "levels": {"concurrency": [1, 4]}, "stage": {"requests": 40}}
    )
    return run_plan_sync(plan)


def test_plot_of_a_real_run_is_a_png(loopback_http, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = _doc(loopback_http.url)
    assert doc.levels[0].telemetry == "unavailable"  # no GPU panel of zeros: one line says so
    path = plot_result(doc, tmp_path / "r.png")
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000


def test_a_run_that_sampled_no_gpu_has_no_gpu_panel_but_one_line(loopback_http) -> None:  # type: ignore[no-untyped-def]
    """A CPU-only run: no empty GPU panel with the sampler's error, one line that says why."""
    import matplotlib.pyplot as plt

    doc = _doc(loopback_http.url)
    fig = figure(doc)
    try:
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == ["end-to-end latency", "time to first token", "throughput"]
        assert "No GPU was sampled." in [t.get_text() for t in fig.texts]
    finally:
        plt.close(fig)
    fig = figure(doc, no_gpu_line=False)  # the HTML report says it in its note instead
    try:
        assert "No GPU was sampled." not in [t.get_text() for t in fig.texts]
    finally:
        plt.close(fig)


def test_plot_refuses_a_result_without_levels(loopback_http, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = _doc(loopback_http.url)
    doc.levels = []
    with pytest.raises(ValueError, match="no levels"):
        plot_result(doc, tmp_path / "r.png")


def test_cli_plot_verifies_the_checksum_first(loopback_http, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "good.json"
    good.write_text(dumps_document(_doc(loopback_http.url)))
    assert main(["plot", str(good), "-o", str(tmp_path / "good.png")]) == 0
    assert (tmp_path / "good.png").read_bytes().startswith(PNG)
    data = json.loads(good.read_text())
    data["levels"][0]["completed"] += 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["plot", str(bad), "-o", str(tmp_path / "bad.png")]) == 2
    assert not (tmp_path / "bad.png").exists()


def test_cli_plot_without_matplotlib_says_how_to_get_it(
    loopback_http,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """matplotlib is an extra (`mcp-operator[plot]`): without it the command explains, exit 2."""
    import sys

    good = tmp_path / "good.json"
    good.write_text(dumps_document(_doc(loopback_http.url)))
    monkeypatch.delitem(sys.modules, "mcp_bench.plot", raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert main(["plot", str(good), "-o", str(tmp_path / "g.png")]) == 2
    assert "pip install 'mcp-operator[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "g.png").exists()
