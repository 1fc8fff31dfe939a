"""Write a result's HTML report and JUnit XML: the one path ``mcp-bench report`` and
``mcp-operator report`` share, including what to say when the ``plot`` extra is missing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from mcp_bench.htmlreport import Table, render_html
from mcp_bench.junit import junit_xml
from mcp_bench.results.document import ResultDocument

EXTRA_MODULES = frozenset({"jinja2", "markupsafe", "matplotlib"})
INSTALL_HINT = "pip install 'mcp-operator[plot]'"


class MissingExtraError(RuntimeError):
    """Jinja2 or matplotlib (the ``plot`` extra) is not installed."""


def render_with_extra(render: Callable[[], str]) -> str:
    """The page ``render`` builds; ``MissingExtraError`` saying how to install the ``plot`` extra
    when Jinja2 or matplotlib is missing (any other missing module is not ours to explain)."""
    try:
        return render()  # imports Jinja2 and matplotlib only now
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] not in EXTRA_MODULES:
            raise
        raise MissingExtraError(f"the HTML report needs Jinja2 and matplotlib: {INSTALL_HINT}") from missing


def write_report(
    doc: ResultDocument, html: Path, junit: Path | None = None, extra: Sequence[Table] = ()
) -> list[Path]:
    """Write the HTML report (with ``extra`` sections) and the JUnit XML of ``doc``; nothing is
    written when the extra the HTML needs is missing. Returns the paths written."""
    page = render_with_extra(lambda: render_html(doc, extra))
    html.write_text(page, encoding="utf-8")
    written = [html]
    if junit is not None:
        junit.write_text(junit_xml(doc), encoding="utf-8")
        written.append(junit)
    return written
