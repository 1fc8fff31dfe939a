"""The Locust engine: each level runs headless in a Locust subprocess (FastHttpUser), plain HTTP only.

Locust's own statistics round percentiles; instead, our locustfile (:mod:`.locustfile`) writes every
request Locust measured to a file, and those records go into the same HDR histograms as the built-in
engine's. Locust's own totals (``--json-file``) are read as a cross-check; a difference is noted.

Closed loop: users = concurrency, no wait time. Open loop: users = ``levels.max_concurrency`` share
the plan's arrival schedule (constant, Poisson or gamma); an arrival with no free user leaves late
and is counted late (``overload: late``; ``drop`` is rejected).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp_bench.engines.base import register_engine
from mcp_bench.engines.external import (
    EngineUnavailableError,
    ExternalEngine,
    ExternalEngineError,
    ExternalLevel,
    LevelRun,
    clean_env,
    reject_unsupported,
)
from mcp_bench.engines.runloop import drain_s, level_schedule
from mcp_bench.load.common import CUT_OFF
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.protocols.http_common import parse_server_header
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta

BACKENDS = ("http",)
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
# The locustfile cannot import mcp_bench (it runs under gevent's monkey patches), so these two
# strings are its side of the record-file contract, spelled the same there.
CONFIG_ENV = "MCP_BENCH_LOCUST_CONFIG"
CUT_OFF_MARK = "cut_off"
# Users are all started at once: the level's clock starts when spawning completes.
SPAWN_RATE_PER_USER = 100


def parse_record_line(line: str) -> tuple[bool, RequestRecord]:
    """One line of our locustfile's record file -> (measured, record with Unix ns instants)."""
    parts = line.split("\t")
    if len(parts) != 7:
        raise ValueError(f"expected 7 tab-separated fields, got {len(parts)}: {line[:200]!r}")
    measured, sched, sent, end, status, kind, detail = parts
    return measured == "1", RequestRecord(
        sent_ns=int(sent),
        end_ns=int(end),
        scheduled_ns=None if sched == "-" else int(sched),
        status=int(status) or None,
        error=None if kind == "-" else ErrorKind(kind),
        error_detail=CUT_OFF if detail == CUT_OFF_MARK else "" if detail == "-" else detail,
    )


@dataclass(frozen=True)
class LocustStats:
    """Locust's own totals for the level (warm-up and cut-offs included), from ``--json-file``.

    Locust writes that file at shutdown; its ``--csv`` files are rewritten only once a second and
    miss the last requests, so they cannot be used for a cross-check.
    """

    requests: int
    failures: int
    max_response_time_ms: float | None


def parse_locust_stats(text: str) -> LocustStats:
    """Sum the entries of Locust's JSON statistics (a list of per-name entries)."""
    entries = json.loads(text)
    if not isinstance(entries, list):
        raise ValueError(f"expected a JSON list of stats entries, got {type(entries).__name__}")
    maxima = [float(e["max_response_time"]) for e in entries if e.get("max_response_time") is not None]
    return LocustStats(
        requests=sum(int(e["num_requests"]) for e in entries),
        failures=sum(int(e["num_failures"]) for e in entries),
        max_response_time_ms=max(maxima) if maxima else None,
    )


class _RecordSink:
    """Adds measured records to the level; remembers the first detail per error kind for the notes."""

    def __init__(self, acc: LevelAccumulator) -> None:
        self.acc = acc
        self.logged = 0  # every line Locust reported (warm-up included, cut-offs excluded)
        self.first_detail: dict[ErrorKind, str] = {}

    def __call__(self, line: str) -> None:
        measured, rec = parse_record_line(line)
        if rec.error_detail != CUT_OFF:
            self.logged += 1
        if rec.error is not None and rec.error not in self.first_detail:
            self.first_detail[rec.error] = rec.error_detail
        if measured:
            self.acc.add(rec)


class LocustEngine(ExternalEngine):
    """``command`` starts Locust (default: ``python -m locust`` of this interpreter)."""

    name = "locust"

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self.command = list(command) if command else [sys.executable, "-m", "locust"]
        self.last_stats: list[LocustStats] = []

    def check_features(self, plan: RunPlan) -> None:
        reject_unsupported(self.name, plan, BACKENDS)
        if plan.levels.open_loop and plan.levels.overload != "late":
            raise PlanError(
                "levels.overload: the locust engine sends arrivals with no free user late ('late'); "
                f"{plan.levels.overload!r} is not supported"
            )

    def check_tool(self) -> None:
        if self.command[1:3] == ["-m", "locust"] and importlib.util.find_spec("locust") is None:
            raise EngineUnavailableError("locust is not installed: pip install 'locust>=2.20,<3'")

    def engine_version(self) -> str:
        try:
            return version("locust")
        except PackageNotFoundError:
            return "unknown"

    def level_config(self, plan: RunPlan, meta: LevelMeta, workdir: Path) -> dict[str, Any]:
        """What our locustfile needs for one level (JSON)."""
        parts = urlsplit(plan.url)
        stage = plan.stage
        cfg: dict[str, Any] = {
            "url": plan.url,
            "host": f"{parts.scheme}://{parts.netloc}",
            "method": plan.payload.method,
            "body": plan.payload.body,
            "headers": dict(plan.payload.headers),
            "timeout_s": plan.request_timeout_s,
            "mode": meta.mode,
            "warmup_s": stage.warmup_s,
            "duration_s": stage.duration_s,
            "requests": stage.requests,
            "drain_s": drain_s(plan),
            "records": str(workdir / "records.tsv"),
            "meta": str(workdir / "meta.json"),
        }
        if meta.mode == "open":
            schedule = level_schedule(plan, meta)
            cfg["offsets_ns"] = schedule.offsets_ns.tolist()
            cfg["warmup_count"] = schedule.warmup_count
        return cfg

    def users(self, plan: RunPlan, meta: LevelMeta) -> int:
        if meta.mode == "closed":
            assert meta.concurrency is not None
            return meta.concurrency
        return plan.levels.max_concurrency

    def locust_args(self, plan: RunPlan, meta: LevelMeta, workdir: Path) -> list[str]:
        users = self.users(plan, meta)
        (workdir / "locust.conf").write_text("", encoding="utf-8")
        return [
            *self.command,
            "-f", str(LOCUSTFILE),
            "--config", str(workdir / "locust.conf"),
            "--headless",
            "-u", str(users),
            "-r", str(users * SPAWN_RATE_PER_USER),
            "-H", urlsplit(plan.url).scheme + "://" + urlsplit(plan.url).netloc,
            "--json-file", str(workdir / "locust_stats"),
            "--only-summary",
            "--exit-code-on-error", "0",
            "--loglevel", "WARNING",
        ]  # fmt: skip

    async def run_level(self, level: ExternalLevel) -> LevelRun:
        plan, meta, workdir = level.plan, level.meta, level.workdir
        cfg_path = workdir / "level.json"
        cfg_path.write_text(json.dumps(self.level_config(plan, meta, workdir)), encoding="utf-8")
        env = clean_env(["LOCUST_"])
        env[CONFIG_ENV] = str(cfg_path)
        sink = _RecordSink(level.acc)
        run = await level.run_tailed(
            self.locust_args(plan, meta, workdir), env=env, records=workdir / "records.tsv", parse=sink
        )
        meta_path = workdir / "meta.json"
        if run.returncode != 0 or not meta_path.exists():
            raise ExternalEngineError(
                f"locust exited with code {run.returncode} before finishing the level; "
                f"stderr: {run.stderr_tail.strip() or '(empty)'}"
            )
        info = json.loads(meta_path.read_text(encoding="utf-8"))
        notes = [f"{kind.value}: {detail}" for kind, detail in sorted(sink.first_detail.items())]
        try:
            stats = parse_locust_stats((workdir / "locust_stats.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError) as exc:
            notes.append(f"locust statistics unreadable: {exc}")
        else:
            self.last_stats.append(stats)
            if stats.requests != sink.logged:
                notes.append(
                    f"locust counted {stats.requests} requests, its request events {sink.logged} "
                    "(warm-up included)"
                )
        name, ver = parse_server_header(str(info.get("server") or ""))
        server = {"server_name": name, "server_version": ver} if name else {}
        return LevelRun(stop_reason=str(info.get("stop_reason") or ""), server=server, notes=notes)


register_engine("locust", LocustEngine)
