"""mcp_bench's public face: what users outside the package (the operator) import.

Plan types, result documents, merge and fit, the engines, the dial guard, the observers and the
report/view pieces the operator renders with. Import from here, not from the modules behind it;
the modules may move, this list stays. It holds only what its callers import
(``tests/bench/test_api.py`` checks it); tests import the modules themselves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcp_bench import dialguard
from mcp_bench.cli_observers import ObserverArgError, build_observers, plan_observers
from mcp_bench.diagnose import DiagnoseInputs, Finding, diagnose
from mcp_bench.dialguard import (
    ENV,
    REFUSED,
    AddressRule,
    DialRefused,
    GuardedSocketFactory,
    IpNetwork,
    check_peer,
)
from mcp_bench.dialguard_requests import guard
from mcp_bench.engines import plan_feature_problem, run_plan_sync
from mcp_bench.engines.gate import GateObserver, LevelProgress, sleep_until
from mcp_bench.engines.runloop import shard_plan
from mcp_bench.htmlreport.view import Table
from mcp_bench.plan import PlanError, RunPlan, format_validation_error
from mcp_bench.protocols import protocol_factory
from mcp_bench.reportfiles import MissingExtraError, write_pages, write_report
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import (
    ChecksumMismatchError,
    DocumentFormatError,
    LevelResult,
    ResultDocument,
    SignatureMismatchError,
    loads_document,
)
from mcp_bench.results.fit import dumps_within
from mcp_bench.results.histogram import LatencyHistogram
from mcp_bench.results.merge import MIN_OVERLAP, MergeError, merge_documents
from mcp_bench.results.serving import ServingGpus
from mcp_bench.results.summary import LevelSummary, summarize
from mcp_bench.saturation import SearchOutcome
from mcp_bench.search.rows import search_line
from mcp_bench.telemetry.observer import TelemetryObserver

if TYPE_CHECKING:  # the [plot] extra (matplotlib, jinja2): loaded on first use, below
    from mcp_bench.htmlreport.charts import data_uri
    from mcp_bench.htmlreport.template import PAGE

_NEED_EXTRAS = {"PAGE": "mcp_bench.htmlreport.template", "data_uri": "mcp_bench.htmlreport.charts"}


def __getattr__(name: str) -> Any:
    """The report pieces that need the [plot] extra, imported when first asked for, so that
    importing this module never needs matplotlib or jinja2."""
    if name in _NEED_EXTRAS:
        return getattr(importlib.import_module(_NEED_EXTRAS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENV",
    "MIN_OVERLAP",
    "PAGE",
    "REFUSED",
    "AddressRule",
    "ChecksumMismatchError",
    "DiagnoseInputs",
    "DialRefused",
    "DocumentFormatError",
    "Finding",
    "GateObserver",
    "GuardedSocketFactory",
    "IpNetwork",
    "LatencyHistogram",
    "LevelMeta",
    "LevelProgress",
    "LevelResult",
    "LevelSummary",
    "MergeError",
    "MissingExtraError",
    "ObserverArgError",
    "PlanError",
    "ResultDocument",
    "RunPlan",
    "SearchOutcome",
    "ServingGpus",
    "SignatureMismatchError",
    "Table",
    "TelemetryObserver",
    "build_observers",
    "check_peer",
    "data_uri",
    "diagnose",
    "dialguard",
    "dumps_within",
    "format_validation_error",
    "guard",
    "loads_document",
    "merge_documents",
    "plan_feature_problem",
    "plan_observers",
    "protocol_factory",
    "run_plan_sync",
    "search_line",
    "shard_plan",
    "sleep_until",
    "summarize",
    "write_pages",
    "write_report",
]
