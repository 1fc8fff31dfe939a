"""One self-contained HTML file from a result document, for people: the reference table per
level, charts, schedule lag, per-class rows, GPU telemetry, the trap detectors' findings, the
engine fingerprint and the CRC-32C. ``mcp-bench report`` and ``mcp-operator report`` both call
:func:`render_html`, so a file from the CLI and one from a cluster's report look alike.

Needs Jinja2 and matplotlib, the ``plot`` extra, when it renders: :func:`render_html` raises
``ModuleNotFoundError`` without them (``mcp_bench.reportfiles`` says what to install), while the
view (``view.Table``, the rows) imports without them, for callers that add sections.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_bench.htmlreport.view import Table, build_view
from mcp_bench.results.document import ResultDocument


@dataclass(frozen=True)
class Charts:
    overview: str | None
    schedule_lag: str | None
    telemetry: str | None


def render_html(doc: ResultDocument, extra: Sequence[Table] = ()) -> str:
    """The report of ``doc`` as one HTML page, charts inline, with ``extra`` sections after the
    run's facts."""
    from mcp_bench.htmlreport import charts  # matplotlib
    from mcp_bench.htmlreport.template import page  # Jinja2

    drawn = Charts(
        overview=charts.overview(doc),
        schedule_lag=charts.schedule_lag(doc),
        telemetry=charts.telemetry_over_time(doc),
    )
    return page().render(view=build_view(doc, extra), charts=drawn)


__all__ = ["Table", "render_html"]
