"""What a person sees, in headless Chromium with the fonts of a default Debian desktop and no
others (a fontconfig of the test's own: DejaVu and Liberation, no emoji font), at the widths of
an 80- and a 160-column terminal (720 and 1440 px):

- both HTML reports (a drill's, ``mcp-operator report --kind mcpr``, and a benchmark's, as
  ``mcp-bench report`` and ``mcp-operator report`` write it) never scroll sideways (a wide table
  scrolls in its own box), every character they show is in those fonts (an emoji such as ✅ would
  be an empty box), and the drill's screenshot is drawn;
- ``kubectl mcp board``'s text of a drill, rendered at 80 and 160 columns into a ``<pre>`` in
  DejaVu Sans Mono (a Debian terminal's font) sized so the window holds exactly that many
  columns: no line is wider than the window, every character is one of that font's (one column
  each), and the screenshot is drawn.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import unicodedata
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from fontTools.ttLib import TTFont
from tests.operator.drillstatus import drill_object

from mcp_bench.htmlreport import render_html
from mcp_bench.results.document import loads_document
from mcp_operator.board.render import board_text
from mcp_operator.report import render_readiness_html

CHROMIUM = "chromium-headless-shell"  # Debian's package of the name, from the Makefile's APT_PACKAGES
H200 = Path(__file__).parents[1] / "bench" / "diagnose" / "fixtures" / "h200" / "instances_8_1.result.json"
# the fonts a default Debian desktop has (fontconfig-config's first choice, and chromium's
# recommendation); no emoji font: the pages must need none
DESKTOP_FONTS = ("fonts-dejavu-core", "fonts-liberation")
MONO = "DejaVuSansMono.ttf"  # a Debian terminal's monospace font, for the board
COLUMNS = (80, 160)
COLUMN_PX = 9  # one terminal column: 80 columns in 720 px, 160 in 1440 px
WIDTHS = tuple(columns * COLUMN_PX for columns in COLUMNS)
FLAGS = ["--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>{fonts}</dir>
  <cachedir>{cache}</cachedir>
  <include ignore_missing="yes">/etc/fonts/conf.d</include>
</fontconfig>
"""
# once the page has laid out, written into the DOM: how far it reaches past the window, the text
# it shows, and (on the board's page) how wide the ruler's columns are
PROBE = """<script>window.addEventListener("load", () => {
  const body = document.body, ruler = document.getElementById("ruler");
  body.dataset.overflow = String(document.documentElement.scrollWidth - window.innerWidth);
  body.dataset.text = body.innerText;
  if (ruler) body.dataset.ruler = String(ruler.getBoundingClientRect().width);
});</script>"""
BOARD_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>kubectl mcp board</title><style>
body {{ margin: 0; background: #fff; color: #222; }}
pre {{ margin: 0; font-family: "DejaVu Sans Mono"; font-size: {size:.6f}px; line-height: 1.2; }}
#ruler {{ visibility: hidden; }}
</style></head><body><pre id="board">{board}</pre><pre><span id="ruler">{ruler}</span></pre></body></html>
"""


@dataclass(frozen=True)
class Fonts:
    """A fontconfig that lists only the desktop's fonts (``env`` runs a program with it)."""

    env: dict[str, str]
    files: tuple[Path, ...]

    def covers(self, *names: str) -> frozenset[int]:
        """The code points the fonts (those named, else all) have a glyph for."""
        return frozenset().union(*(_cmap(f) for f in self.files if not names or f.name in names))


@cache
def _cmap(font: Path) -> frozenset[int]:
    return frozenset(TTFont(font, lazy=True).getBestCmap())


def uncovered(text: str, covered: frozenset[int]) -> set[str]:
    """The characters of ``text`` no font has (line breaks and tabs aside: they draw nothing)."""
    return {c for c in text if ord(c) not in covered and unicodedata.category(c) != "Cc"}


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = shutil.which(CHROMIUM)
    if binary is None:
        pytest.skip(f"{CHROMIUM} is not installed (make system-packages installs it)")
    return binary


@pytest.fixture(scope="module")
def fonts(tmp_path_factory: pytest.TempPathFactory) -> Fonts:
    """The font files of ``DESKTOP_FONTS`` that are installed, linked into a folder of their own
    and listed by a fonts.conf that keeps the system's rules (which font a family means)."""
    files: list[Path] = []
    for package in DESKTOP_FONTS:
        listed = subprocess.run(["dpkg-query", "-L", package], capture_output=True, text=True, check=False)
        files += [
            Path(p) for p in listed.stdout.splitlines() if p.endswith((".ttf", ".otf")) and Path(p).is_file()
        ]
    if not any(f.name == MONO for f in files):
        pytest.skip("fonts-dejavu-core is not installed (make system-packages installs it)")
    root = tmp_path_factory.mktemp("desktop-fonts")
    (root / "fonts").mkdir()
    for font in files:
        (root / "fonts" / font.name).symlink_to(font)
    conf = root / "fonts.conf"
    conf.write_text(FONTS_CONF.format(fonts=root / "fonts", cache=root / "cache"), encoding="utf-8")
    return Fonts({**os.environ, "FONTCONFIG_FILE": str(conf)}, tuple(files))


class _Body(HTMLParser):
    """The ``data-*`` attributes the probe wrote on ``<body>``, unescaped."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self.data = {k.removeprefix("data-"): v or "" for k, v in attrs if k.startswith("data-")}


def _probe(chromium: str, fonts: Fonts, page: str, path: Path, width: int) -> dict[str, str]:
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [chromium, *FLAGS, f"--window-size={width},1000", "--dump-dom", path.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=fonts.env,
    ).stdout
    body = _Body()
    body.feed(dom)
    assert "overflow" in body.data, f"the probe did not run on {path.name}"
    return body.data


def _screenshot(chromium: str, fonts: Fonts, page: str, path: Path, width: int, height: int) -> np.ndarray:
    path.write_text(page, encoding="utf-8")
    shot = path.with_suffix(".png")
    subprocess.run(
        [chromium, *FLAGS, f"--window-size={width},{height}", f"--screenshot={shot}", path.as_uri()],
        capture_output=True,
        timeout=60,
        check=True,
        env=fonts.env,
    )
    pixels: np.ndarray = np.round(matplotlib.image.imread(shot)[..., :3] * 255).astype(int)
    assert pixels.shape[:2] == (height, width)
    return pixels


def _drawn(pixels: np.ndarray) -> bool:
    """Text was drawn: not one colour, and some dark pixels."""
    return bool(pixels.std() > 20 and (pixels.max(axis=2) < 80).mean() > 0.002)


def _pages() -> dict[str, str]:
    return {
        "drill": render_readiness_html(drill_object(failing=True)),
        "benchmark": render_html(loads_document(H200.read_text())),
    }


def test_chromium_gets_the_desktop_fonts_and_no_other(fonts: Fonts) -> None:
    if shutil.which("fc-list") is None:
        pytest.skip("fontconfig's tools are not installed")
    listed = subprocess.run(
        ["fc-list", "--format", "%{file}\n"], capture_output=True, text=True, check=True, env=fonts.env
    ).stdout.split()
    assert sorted(Path(p).name for p in listed) == sorted(f.name for f in fonts.files)
    for family, font in (("monospace", "DejaVu Sans Mono"), ("sans-serif", "DejaVu Sans")):
        matched = subprocess.run(
            ["fc-match", "--format", "%{family[0]}", family], capture_output=True, text=True, env=fonts.env
        )
        assert matched.stdout == font, f"{family} is {matched.stdout} here, {font} on the desktop"


def test_the_coverage_check_finds_an_emoji_the_desktop_fonts_lack(fonts: Fonts) -> None:
    assert uncovered("✅ Pass, ❌ Fail, 🚀", fonts.covers()) == {"✅", "❌", "🚀"}
    assert uncovered("✓ Pass · ✗ Fail · ! Warn · ? … ─ →\n", fonts.covers(MONO)) == set()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_report_fits_the_window_and_shows_only_what_the_desktop_fonts_draw(
    chromium: str, fonts: Fonts, tmp_path: Path, width: int
) -> None:
    for name, page in _pages().items():
        assert "<script" not in page  # the report itself runs nothing; the probe is the test's
        seen = _probe(chromium, fonts, page, tmp_path / f"{name}.html", width)
        assert int(seen["overflow"]) == 0, f"the {name} report is wider than {width} px"
        assert len(seen["text"]) > 500  # the tables were laid out and read
        missing = uncovered(seen["text"], fonts.covers())
        assert not missing, f"the {name} report shows characters no desktop font has: {sorted(missing)}"


def test_the_drill_report_is_drawn_at_720_px(chromium: str, fonts: Fonts, tmp_path: Path) -> None:
    assert _drawn(_screenshot(chromium, fonts, _pages()["drill"], tmp_path / "drill.html", 720, 1600))


def _board_page(fonts: Fonts, text: str, columns: int) -> str:
    """The board's text in DejaVu Sans Mono at the size that makes one column ``COLUMN_PX``."""
    font = TTFont(next(f for f in fonts.files if f.name == MONO), lazy=True)
    advance = font["hmtx"]["M"][0] / font["head"].unitsPerEm  # every glyph's: a monospace font
    return BOARD_PAGE.format(size=COLUMN_PX / advance, board=html.escape(text), ruler="M" * columns)


@pytest.mark.parametrize("columns", COLUMNS)
def test_the_board_fits_a_terminal_of_its_width_in_the_desktops_monospace_font(
    chromium: str, fonts: Fonts, tmp_path: Path, columns: int
) -> None:
    text = board_text(drill_object(failing=True), width=columns)
    assert all(verdict in text for verdict in ("✓ Pass", "✗ Fail", "! Warn"))  # the marks are its own
    missing = uncovered(text, fonts.covers(MONO))
    assert not missing, f"the board shows characters DejaVu Sans Mono lacks: {sorted(missing)}"
    width = columns * COLUMN_PX
    page = _board_page(fonts, text, columns)
    seen = _probe(chromium, fonts, page, tmp_path / "board.html", width)
    column = float(seen["ruler"]) / columns
    assert columns * column <= width < (columns + 1) * column, f"the window is not {columns} columns wide"
    assert int(seen["overflow"]) == 0, f"a line of the board is wider than {columns} columns"
    assert not uncovered(seen["text"], fonts.covers(MONO))
    assert _drawn(_screenshot(chromium, fonts, page, tmp_path / "board.html", width, 1200))
