"""The k6 engine: each level runs in a k6 the user supplies (k6 is AGPL: never installed or shipped here).

k6 runs the generated script (:mod:`.k6_script`) with ``--out json=`` (one JSON point per metric
sample) and ``--summary-export``. Every ``http_req_duration`` point of the measured scenario becomes
one request record (k6 stamps the point at the request's end; its duration is sending + waiting +
receiving, without connection set-up), so the result document gets exact HDR histograms instead of
k6's summary percentiles. Errors are classified from k6's ``error_code`` and ``status`` tags.

Plain HTTP only. Open loop: k6 gives no per-arrival scheduled instant, so schedule lag and latency
from the schedule are not reported (a note says so); arrivals k6 could not start are counted dropped.
"""

from __future__ import annotations

import json
import re
import subprocess
from array import array
from dataclasses import dataclass, field
from typing import Any

from mcp_bench.engines.base import register_engine
from mcp_bench.engines.external import (
    ExternalEngine,
    ExternalEngineError,
    ExternalLevel,
    LevelRun,
    clean_env,
    find_tool,
    reject_unsupported,
)
from mcp_bench.engines.k6_script import MEASURE_SCENARIO, SENT_METRIC, SERVER_MARK, k6_script
from mcp_bench.engines.runloop import drain_s
from mcp_bench.load.common import CUT_OFF
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.protocols.http_common import parse_server_header
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator
from mcp_common import rfc3339

BACKENDS = ("http",)
MISSING_HINT = "mcp-operator does not ship k6 (AGPL); install it yourself"
OPEN_LOOP_NOTE = (
    "k6 reports no scheduled send instant per arrival: schedule lag and latency from the schedule "
    "are not measured; arrivals k6 could not start (no free VU) are counted dropped"
)
_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$")
_VERSION = re.compile(r"\bv?(\d+\.\d+\.\d+[^\s,()]*)")


def parse_rfc3339_ns(text: str) -> int:
    """Unix ns of an RFC 3339 time with up to nanosecond digits (``datetime`` keeps only micro)."""
    m = _RFC3339.match(text)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    whole, frac, zone = m.groups()
    base = rfc3339.parse(whole + zone)
    return int(base.timestamp()) * 1_000_000_000 + int((frac or "0")[:9].ljust(9, "0"))


def classify(status: int, error_code: int | None) -> ErrorKind | None:
    """Error kind of one k6 request from its tags (k6's documented error codes); None when it succeeded."""
    if error_code is None:
        if status == 0:
            return ErrorKind.OTHER
        return ErrorKind.HTTP_STATUS if status >= 400 else None
    if 1400 <= error_code < 1600 or (status >= 400 and error_code == 0):
        return ErrorKind.HTTP_STATUS
    if error_code in (1050, 1211):
        return ErrorKind.TIMEOUT
    if 1100 <= error_code < 1200 or error_code in (1010, 1210, 1212, 1213) or 1300 <= error_code < 1400:
        return ErrorKind.CONNECT
    if error_code in (1200, 1201, 1202, 1220) or 1600 <= error_code < 1700:
        return ErrorKind.DISCONNECTED
    return ErrorKind.OTHER


def request_record(point: dict[str, Any]) -> RequestRecord:
    """One ``http_req_duration`` point (``data`` of a JSON output line) -> a record in Unix ns."""
    tags = point.get("tags") or {}
    end = parse_rfc3339_ns(point["time"])
    sent = end - round(float(point["value"]) * 1e6)
    status = int(tags.get("status") or 0)
    code = tags.get("error_code")
    kind = classify(status, None if code in (None, "") else int(code))
    return RequestRecord(
        sent_ns=sent,
        end_ns=end,
        status=status or None,
        error=kind,
        error_detail="" if kind is None else f"k6 error_code={code or '-'} status={status}",
    )


@dataclass
class K6Points:
    """Feeds k6 JSON output lines into a level: measured requests, drops, sends (for cut-offs)."""

    acc: LevelAccumulator
    measure_scenario: str = MEASURE_SCENARIO
    requests: int = 0  # http_req_duration points, all scenarios (for the cross-check)
    measured: int = 0
    sent_ns: array[int] = field(default_factory=lambda: array("q"))
    first_detail: dict[ErrorKind, str] = field(default_factory=dict)

    def __call__(self, line: str) -> None:
        # Most lines are other metrics (blocked, connecting, ...): skip them before parsing JSON.
        if '"Point"' not in line or not any(
            m in line for m in ('"http_req_duration"', '"dropped_iterations"', f'"{SENT_METRIC}"')
        ):
            return
        item = json.loads(line)
        if item.get("type") != "Point":
            return
        data = item["data"]
        metric = item.get("metric")
        in_measure = (data.get("tags") or {}).get("scenario") == self.measure_scenario
        if metric == "http_req_duration":
            self.requests += 1
            if in_measure:
                rec = request_record(data)
                self.measured += 1
                if rec.error is not None:
                    self.first_detail.setdefault(rec.error, rec.error_detail)
                self.acc.add(rec)
        elif metric == "dropped_iterations" and in_measure:
            for _ in range(round(float(data["value"]))):
                self.acc.add_dropped()
        elif metric == SENT_METRIC and in_measure:
            self.sent_ns.append(parse_rfc3339_ns(data["time"]))

    def add_cut_offs(self, end_ns: int) -> int:
        """Requests the measured scenario sent without an answer (cut off when the level stopped):
        recorded as timeouts, sent at the latest send instants. Returns how many."""
        missing = len(self.sent_ns) - self.measured
        if missing <= 0:
            return 0
        for sent in sorted(self.sent_ns)[-missing:]:
            self.acc.add(
                RequestRecord(
                    sent_ns=sent, end_ns=max(sent, end_ns), error=ErrorKind.TIMEOUT, error_detail=CUT_OFF
                )
            )
        return missing


def summary_http_reqs(text: str) -> int | None:
    """``http_reqs`` count from a ``--summary-export`` document (None when absent)."""
    metrics = json.loads(text).get("metrics", {})
    count = metrics.get("http_reqs", {}).get("count")
    return None if count is None else int(count)


def server_from_console(text: str) -> dict[str, str]:
    for line in text.splitlines():
        at = line.find(SERVER_MARK)
        if at >= 0:
            value = line[at + len(SERVER_MARK) :].split('"')[0].strip()
            name, version = parse_server_header(value)
            if name:
                return {"server_name": name, "server_version": version}
    return {}


class K6Engine(ExternalEngine):
    """``binary``: a k6 executable (path or name on PATH); default ``k6`` on PATH."""

    name = "k6"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary
        self._path: str | None = None

    @property
    def path(self) -> str:
        if self._path is None:
            self._path = find_tool("k6", self.binary, MISSING_HINT)
        return self._path

    def check_features(self, plan: RunPlan) -> None:
        reject_unsupported(self.name, plan, BACKENDS)
        lv = plan.levels
        if lv.open_loop:
            if lv.arrival != "constant":
                raise PlanError(
                    "levels.arrival: the k6 engine runs open loop with k6's constant-arrival-rate "
                    f"executor; set 'constant' (got {lv.arrival!r})"
                )
            if lv.overload != "drop":
                raise PlanError(
                    "levels.overload: k6 drops arrivals that find no free VU (dropped_iterations); "
                    f"set 'drop' (got {lv.overload!r})"
                )

    def check_tool(self) -> None:
        _ = self.path  # no k6: fail here, before any traffic

    def engine_version(self) -> str:
        try:
            out = subprocess.run(
                [self.path, "version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ExternalEngineError(f"{self.path} version: {exc}") from exc
        m = _VERSION.search(out.stdout)
        return m.group(1) if m else out.stdout.strip()[:60] or "unknown"

    async def run_level(self, level: ExternalLevel) -> LevelRun:
        plan, meta, workdir, acc = level.plan, level.meta, level.workdir, level.acc
        script = workdir / "level.js"
        script.write_text(k6_script(plan, meta, drain_s(plan)), encoding="utf-8")
        points = K6Points(acc)
        cmd = [
            self.path, "run", "--quiet", "--no-usage-report", "--no-color",
            "--out", f"json={workdir / 'points.json'}",
            "--summary-export", str(workdir / "summary.json"),
            "--console-output", str(workdir / "console.log"),
            str(script),
        ]  # fmt: skip
        run = await level.run_tailed(
            cmd, env=clean_env(["K6_"]), records=workdir / "points.json", parse=points
        )
        # k6 exits 99 when thresholds fail; the script sets none, so anything but 0 is a failure.
        if run.returncode != 0:
            raise ExternalEngineError(
                f"k6 exited with code {run.returncode}; stderr: {run.stderr_tail.strip() or '(empty)'}"
            )
        notes = [OPEN_LOOP_NOTE] if meta.mode == "open" else []
        end_ns = acc.last_end if acc.last_end is not None else 0
        cut = points.add_cut_offs(end_ns)
        if cut:
            notes.append(f"{cut} requests still in flight when k6 stopped the level: counted as timeouts")
        notes += [f"{kind.value}: {detail}" for kind, detail in sorted(points.first_detail.items())]
        summary = workdir / "summary.json"
        try:
            counted = summary_http_reqs(summary.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            notes.append(f"k6 summary unreadable: {exc}")
        else:
            if counted is not None and counted != points.requests:
                notes.append(f"k6 summary counted {counted} requests, its JSON output {points.requests}")
        console = workdir / "console.log"
        server = server_from_console(console.read_text(encoding="utf-8")) if console.exists() else {}
        stop = "requests" if plan.stage.requests is not None and meta.mode == "closed" else "duration"
        return LevelRun(stop_reason=stop, server=server, notes=notes)


register_engine("k6", K6Engine)
