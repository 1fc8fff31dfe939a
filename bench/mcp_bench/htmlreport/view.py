"""What the HTML report shows, as plain rows of strings: the template only lays them out.

Figures come from the same level summary the CLI table, CSV and the operator's status use
(``mcp_bench.results.summary``), so the report cannot disagree with them. A GPU figure the run
did not measure is ``unavailable``, never 0; a column no level has is left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from mcp_bench.diagnose import DiagnoseInputs, Finding, diagnose
from mcp_bench.forensics.sources import memory_forensics
from mcp_bench.results.consistency import consistency_cell
from mcp_bench.results.document import LevelResult, ResultDocument, dumps_document
from mcp_bench.results.serving import serving_cell, serving_gpus
from mcp_bench.results.summary import gpu_field_mean, slo_mark, summarize
from mcp_bench.search.rows import PROBE_HEADERS, probe_rows, summary_rows
from mcp_common.redact import redact_url

UNAVAILABLE = "unavailable"


def fmt(value: float | None, digits: int = 2) -> str:
    """One spelling of a figure everywhere in the report: fixed digits, ``-`` for no data."""
    return "-" if value is None else f"{value:.{digits}f}"


@dataclass(frozen=True)
class Table:
    """A table with an id (the tests and readers find it by id), headers and rows of text; a title
    where it is a section of its own (what a caller adds, such as the cluster's view of the run)."""

    id: str
    headers: list[str]
    rows: list[list[str]]
    title: str = ""


@dataclass
class ReportView:
    title: str
    verdict: str
    facts: list[tuple[str, str]]
    tables: dict[str, Table]
    telemetry_note: str
    telemetry_detail: str  # why no GPU was sampled, as the sampler said it (NVML's error)
    findings: list[Finding]
    extra: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crc32c: str = ""


NO_GPU = "No GPU was sampled: the GPU columns and charts are left out."


def _telemetry_reason(doc: ResultDocument) -> tuple[str, str]:
    """One line for a run that sampled no GPU (a CPU-only machine, or no ``--gpu-telemetry``),
    and the sampler's own reason (an NVML error) kept for the curious: "" and "" where a GPU was
    sampled."""
    for tel in (doc.telemetry, *(lv.telemetry for lv in doc.levels)):
        if isinstance(tel, dict) and tel.get("status") == "ok":
            return "", ""
    for tel in (doc.telemetry, *(lv.telemetry for lv in doc.levels)):
        if isinstance(tel, dict) and tel.get("reason"):
            return NO_GPU, str(tel["reason"])
    return NO_GPU, "no GPU telemetry was asked for (mcp-bench run --gpu-telemetry)"


def level_table(doc: ResultDocument) -> Table:
    """The reference table: one row per level, latency as the SLO judges it."""
    rows: list[list[str]] = []
    gpu_cols: list[tuple[str, list[str]]] = [("GPU mem peak %", []), ("SM util %", []), ("Power W", [])]
    for lv in doc.levels:
        s = summarize(doc, lv)
        rows.append(
            [
                s.level,
                fmt(s.p50_ms),
                fmt(s.p95_ms),
                fmt(s.p99_ms),
                fmt(s.mean_ms),
                fmt(s.throughput_rps, 1),
                str(s.completed),
                str(s.errors),
            ]
        )
        gpu_cols[0][1].append(UNAVAILABLE if s.gpu_memory_peak_pct is None else fmt(s.gpu_memory_peak_pct, 1))
        for (_, col), name in zip(gpu_cols[1:], ("sm_util_pct", "power_w"), strict=True):
            mean = gpu_field_mean(lv.telemetry, name)
            col.append(UNAVAILABLE if mean is None else fmt(mean, 1))
    headers = ["Level", "P50 ms", "P95 ms", "P99 ms", "Mean ms", "Throughput/s", "OK", "Errors"]
    for name, col in gpu_cols:
        if any(v != UNAVAILABLE for v in col):
            headers.append(name)
            for row, value in zip(rows, col, strict=True):
                row.append(value)
    if any(lv.consistency for lv in doc.levels):  # the reference table's output-consistency column
        headers.append("Consistency")
        for row, lv in zip(rows, doc.levels, strict=True):
            row.append(consistency_cell(lv.consistency))
    serving = [serving_gpus(lv.server_metrics) for lv in doc.levels]
    if any(s is not None for s in serving):  # the server's GPUs (DCGM, gpu-sampler), not the client's
        headers.append("Serving GPU")
        for row, served in zip(rows, serving, strict=True):
            row.append(serving_cell(served))
    headers.append("SLO")
    for row, lv in zip(rows, doc.levels, strict=True):
        row.append(slo_mark(lv.slo.passed) or "-")
    return Table("levels", headers, rows)


def schedule_table(doc: ResultDocument) -> Table | None:
    """Open loop only: how far sends fell behind the schedule (coordinated omission)."""
    if not doc.plan.levels.open_loop:
        return None
    rows = []
    for lv in doc.levels:
        lag = lv.latency.get("schedule_lag")
        rows.append(
            [
                lv.level_label,
                fmt(lv.requested_rate, 1),
                fmt(lv.achieved_rate, 1),
                fmt(lag.p50_ms if lag else None, 3),
                fmt(lag.p99_ms if lag else None, 3),
                fmt(lag.max_ms if lag else None, 3),
                str(lv.late),
                str(lv.dropped),
            ]
        )
    headers = ["Level", "Requested/s", "Achieved/s", "Lag P50 ms", "Lag P99 ms", "Lag max ms"]
    headers += ["Late", "Dropped"]
    return Table("schedule", headers, rows)


def _tag_rows(doc: ResultDocument, lv: LevelResult) -> list[list[str]]:
    basis = summarize(doc, lv).latency_basis
    rows = []
    for key, values in (lv.breakdown or {}).items():
        for value, tag in values.items():
            lat = tag.latency.get(basis) or tag.latency.get("e2e")
            rows.append(
                [
                    lv.level_label,
                    key,
                    value,
                    str(tag.sent),
                    str(tag.completed),
                    str(tag.failed),
                    fmt(lat.p50_ms if lat else None),
                    fmt(lat.p95_ms if lat else None),
                    fmt(lat.p99_ms if lat else None),
                ]
            )
    return rows


def breakdown_table(doc: ResultDocument) -> Table | None:
    """Per request class (and per prompt shape of a sweep), when the run tagged its requests."""
    rows = [row for lv in doc.levels for row in _tag_rows(doc, lv)]
    if not rows:
        return None
    headers = ["Level", "Tag", "Value", "Sent", "OK", "Failed", "P50 ms", "P95 ms", "P99 ms"]
    return Table("breakdown", headers, rows)


def slo_table(doc: ResultDocument) -> Table | None:
    rows = [
        [
            lv.level_label,
            check.name,
            f"{check.target:g}",
            "no data" if check.actual is None else f"{check.actual:.4g}",
            "Pass" if check.passed else "Fail",
            check.detail,
        ]
        for lv in doc.levels
        for check in lv.slo.checks
    ]
    if not rows:
        return None
    return Table("slo", ["Level", "Objective", "Target", "Actual", "Verdict", "Judged"], rows)


def _mib(value: float | None) -> str:
    return fmt(None if value is None else value / 2**20, 1)


def memory_tables(doc: ResultDocument) -> list[Table]:
    """The GPU-memory forensics per source: a row per level, then what was found."""
    report = memory_forensics(doc)
    rows, found = [], []
    for source, verdict in report.items():
        for row in verdict["levels"]:
            returned = row.get("returned")
            rows.append(
                [
                    source,
                    row["level"],
                    _mib(row.get("before_bytes")),
                    _mib(row.get("peak_bytes")),
                    fmt(row.get("peak_percent"), 1),
                    _mib(row.get("after_bytes")),
                    _mib(row.get("retained_bytes")),
                    "-" if returned is None else "yes" if returned else "no",
                ]
            )
        found += [[source, f["kind"], f["level"] or "", f["summary"]] for f in verdict["findings"]]
    if not rows:
        return []
    headers = ["Source", "Level", "Before MiB", "Peak MiB", "Peak %", "After MiB", "Kept MiB", "Returned"]
    tables = [Table("memory", headers, rows)]
    if found:
        tables.append(Table("memory-findings", ["Source", "Finding", "Level", "Evidence"], found))
    return tables


def engine_table(doc: ResultDocument) -> Table:
    rows = [[name, str(value)] for name, value in doc.engine.model_dump().items() if value]
    rows += [[f"origin.{name}", value] for name, value in sorted(doc.origin.items())]
    return Table("engine", ["Field", "Value"], rows)


def search_tables(doc: ResultDocument) -> list[Table]:
    """A saturation search's answer, knee and stop reason, then every probe as it ran."""
    if doc.search is None:
        return []
    return [
        Table("search", ["", ""], summary_rows(doc.search), title="Saturation search"),
        Table("search-probes", PROBE_HEADERS, probe_rows(doc.search), title="Search probes, in order"),
    ]


def checksum(doc: ResultDocument) -> str:
    """The document's CRC-32C as read; one computed now for a document never written out."""
    if doc.crc32c:
        return doc.crc32c
    return str(json.loads(dumps_document(doc))["crc32c"])


def build_view(doc: ResultDocument, extra: Sequence[Table] = ()) -> ReportView:
    """Everything the report shows of ``doc``, the trap detectors' findings included, and the
    ``extra`` sections a caller adds."""
    verdict = {None: "no SLO declared", True: "SLO met", False: "SLO missed"}[doc.slo_passed]
    basis = summarize(doc, doc.levels[0]).latency_basis if doc.levels else "e2e"
    model = f" {doc.plan.model}" if doc.plan.model else ""
    facts = [
        ("target", f"{doc.plan.backend}{model} {redact_url(doc.plan.url)}"),
        ("load", "open loop (requests/s)" if doc.plan.levels.open_loop else "closed loop (concurrency)"),
        ("latency", "from the scheduled send" if basis == "e2e_from_schedule" else "from the actual send"),
        ("started", doc.started_at.isoformat()),
        ("ended", doc.ended_at.isoformat()),
        ("shards", str(doc.shards)),
    ]
    tables = {"levels": level_table(doc), "engine": engine_table(doc)}
    note, detail = _telemetry_reason(doc)
    for table in (schedule_table(doc), breakdown_table(doc), slo_table(doc), *memory_tables(doc)):
        if table is not None:
            tables[table.id] = table
    return ReportView(
        title=f"mcp-bench report: {doc.plan.backend} {redact_url(doc.plan.url)}",
        verdict=verdict,
        facts=facts,
        tables=tables,
        telemetry_note=note,
        telemetry_detail=detail,
        findings=diagnose(DiagnoseInputs(document=doc)),
        extra=[*search_tables(doc), *extra],
        notes=list(doc.notes),
        crc32c=checksum(doc),
    )
