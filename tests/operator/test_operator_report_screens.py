"""Both HTML reports (a drill's, ``mcp-operator report --kind mcpr``, and a benchmark's, as
``mcp-bench report`` and ``mcp-operator report`` write it) opened in headless Chromium at the
widths of an 80- and a 160-column terminal beside it (720 and 1440 px): the page never scrolls
sideways (a wide table scrolls in its own box), and its screenshot is drawn (not one colour)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from tests.operator.drillstatus import drill_object

from mcp_bench.htmlreport import render_html
from mcp_bench.results.document import loads_document
from mcp_operator.report import render_readiness_html

CHROMIUM = "chromium-headless-shell"  # Debian's package of the name, from the Makefile's APT_PACKAGES
H200 = Path(__file__).parents[1] / "bench" / "diagnose" / "fixtures" / "h200" / "instances_8_1.result.json"
WIDTHS = (720, 1440)
FLAGS = ["--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
# how far the page reaches past the window, written into the DOM once it has laid out
PROBE = """<script>window.addEventListener("load", () => { document.body.dataset.overflow =
String(document.documentElement.scrollWidth - window.innerWidth); });</script>"""


def _pages() -> dict[str, str]:
    return {
        "drill": render_readiness_html(drill_object(failing=True)),
        "benchmark": render_html(loads_document(H200.read_text())),
    }


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = shutil.which(CHROMIUM)
    if binary is None:
        pytest.skip(f"{CHROMIUM} is not installed (make system-packages installs it)")
    return binary


def _overflow(chromium: str, html: Path, width: int) -> int:
    dom = subprocess.run(
        [chromium, *FLAGS, f"--window-size={width},1000", "--dump-dom", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return int(dom.split('data-overflow="', 1)[1].split('"', 1)[0])


@pytest.mark.parametrize("width", WIDTHS)
def test_no_report_scrolls_sideways(chromium: str, tmp_path: Path, width: int) -> None:
    for name, page in _pages().items():
        assert "<script" not in page  # the report itself runs nothing; the probe is the test's
        html = tmp_path / f"{name}.html"
        html.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
        assert _overflow(chromium, html, width) == 0, f"the {name} report is wider than {width} px"


def test_the_drill_report_is_drawn_at_720_px(chromium: str, tmp_path: Path) -> None:
    html, shot = tmp_path / "drill.html", tmp_path / "drill.png"
    html.write_text(_pages()["drill"], encoding="utf-8")
    subprocess.run(
        [chromium, *FLAGS, "--window-size=720,1600", f"--screenshot={shot}", html.as_uri()],
        capture_output=True,
        timeout=60,
        check=True,
    )
    pixels = np.round(matplotlib.image.imread(shot)[..., :3] * 255).astype(int)
    assert pixels.shape[:2] == (1600, 720)
    assert pixels.std() > 20 and (pixels.max(axis=2) < 80).mean() > 0.002  # text was drawn
