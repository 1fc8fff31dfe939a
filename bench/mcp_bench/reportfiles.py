"""Write a result's HTML report and JUnit XML: the one path ``mcp-bench report`` and
``mcp-operator report`` share, including what to say when the ``plot`` extra is missing.

JUnit XML needs the standard library only, so it is written first and whatever the page needs:
a CI job without the ``plot`` extra still gets its test results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from mcp_bench.htmlreport import Table, render_html
from mcp_bench.junit import junit_xml
from mcp_bench.results.document import ResultDocument

EXTRA_MODULES = frozenset({"jinja2", "markupsafe", "matplotlib"})
INSTALL_HINT = "pip install 'mcp-operator[plot]'"
CHECKOUT = Path(__file__).resolve().parents[2]  # the repository root of an editable install


class MissingExtraError(RuntimeError):
    """Jinja2 or matplotlib (the ``plot`` extra) is not installed; ``written`` holds what was
    written all the same (the JUnit XML)."""

    def __init__(self, message: str, written: Sequence[Path] = ()) -> None:
        super().__init__(message)
        self.written = list(written)


def install_hint(checkout: Path = CHECKOUT, cwd: Path | None = None) -> str:
    """The command that installs the ``plot`` extra here: ``pip install -e '.[plot]'`` where the
    package runs from a source checkout (as ``make demo`` installs it), else from the index."""
    if not (checkout / "pyproject.toml").is_file():
        return INSTALL_HINT
    here = (cwd or Path.cwd()).resolve()
    return f"pip install -e '{'.' if here == checkout.resolve() else checkout}[plot]'"


def render_with_extra(render: Callable[[], str]) -> str:
    """The page ``render`` builds; ``MissingExtraError`` saying how to install the ``plot`` extra
    when Jinja2 or matplotlib is missing (any other missing module is not ours to explain)."""
    try:
        return render()  # imports Jinja2 and matplotlib only now
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] not in EXTRA_MODULES:
            raise
        raise MissingExtraError(
            f"the HTML report needs the plot extra (Jinja2, matplotlib): {install_hint()}"
        ) from missing


def write_pages(
    render: Callable[[], str], html: Path, junit: Path | None, write_junit: Callable[[Path], None]
) -> list[Path]:
    """Write the JUnit XML to ``junit`` (when given) with ``write_junit``, then the page ``render``
    builds to ``html``; returns the paths written, the page first. Without the ``plot`` extra:
    ``MissingExtraError`` carrying the JUnit path."""
    written: list[Path] = []
    if junit is not None:
        write_junit(junit)
        written.append(junit)
    try:
        page = render_with_extra(render)
    except MissingExtraError as missing:
        raise MissingExtraError(str(missing), written) from missing.__cause__
    html.write_text(page, encoding="utf-8")
    return [html, *written]


def write_report(
    doc: ResultDocument, html: Path, junit: Path | None = None, extra: Sequence[Table] = ()
) -> list[Path]:
    """Write the JUnit XML and the HTML report (with ``extra`` sections) of ``doc``; only the
    JUnit XML when the extra the HTML needs is missing. Returns the paths written."""

    def write_junit(path: Path) -> None:
        path.write_text(junit_xml(doc), encoding="utf-8")

    return write_pages(lambda: render_html(doc, extra), html, junit, write_junit)
