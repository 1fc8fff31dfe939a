"""The start barrier and live progress of a run, as pure functions over what the API holds.

Each shard fills in its own progress object (``<job>-progress-<i>``, which only the run's pods may
update) with a small report signed with the run's key: state (``waiting`` at a level's barrier,
``running``, ``finished``), level, counters, rate and ETA. A report counts only under the trust
rules that results follow: the object named for index ``i``, signed with the run's key, written
by a pod of the run's Job with index ``i``, and no larger than ``PROGRESS_LIMIT_BYTES``.

When every shard still running waits at the same level, the operator writes that level's start
time (now plus a lead that covers the shards' polling) into ``<job>-start``, signed with the
run's key, which the shards may only read; each one takes a start only with that signature and
no further ahead than the barrier ever sets one, sleeps until then and starts its window. A
shard whose pod has ended does not hold the others; a shard that has not started yet does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..api.barrier import BenchmarkProgress
from ..api.benchmark import MCPBenchmarkSpec
from .contract import (
    ENV_BARRIER_TIMEOUT,
    ENV_PROGRESS_INTERVAL,
    ENV_START_BARRIER,
    PROGRESS_LIMIT_BYTES,
    progress_object_name,
    run_state_object,
    start_object_name,
)

POLL_S = 0.5  # how often a waiting shard reads the start object
LEAD_NS = 2_000_000_000  # a level starts this long after the operator writes its time
MIN_OVERLAP = 0.9
WAITING, RUNNING, FINISHED = "waiting", "running", "finished"
BARRIER_FIRST_LEVEL = "first"  # ENV_START_BARRIER's value for a barrier at the first level only
STATES = frozenset({"starting", WAITING, RUNNING, FINISHED})


def barrier_on(spec: MCPBenchmarkSpec) -> bool:
    """A barrier needs two shards to mean anything; it is on unless the spec turns it off. One
    at the first level only is on for one shard too: its start time is what it is for."""
    if spec.start_barrier is not None and not spec.start_barrier.every_level:
        return spec.start_barrier.enabled
    return spec.shards > 1 and (spec.start_barrier is None or spec.start_barrier.enabled)


def first_level_only(spec: MCPBenchmarkSpec) -> bool:
    return spec.start_barrier is not None and not spec.start_barrier.every_level


def min_overlap(spec: MCPBenchmarkSpec) -> float:
    return MIN_OVERLAP if spec.start_barrier is None else spec.start_barrier.min_overlap


def progress_interval_s(shards: int) -> float:
    """Least time between two progress writes of one shard: 2 s, longer for many shards, so a
    run writes at most about 20 progress updates a second whatever its size."""
    return max(2.0, shards / 20)


def state_objects(*, spec: MCPBenchmarkSpec, benchmark: str, uid: str, job: str) -> list[dict[str, Any]]:
    """The run's progress objects (one per shard) and, with a barrier, its start object."""
    names = [progress_object_name(job, index) for index in range(spec.shards)]
    if barrier_on(spec):
        names.append(start_object_name(job))
    return [run_state_object(name=name, job=job, benchmark=benchmark, uid=uid) for name in names]


def with_run_state_env(job: dict[str, Any], spec: MCPBenchmarkSpec) -> dict[str, Any]:
    """The Job with what its shards need to report progress and wait at the barrier."""
    env = [{"name": ENV_PROGRESS_INTERVAL, "value": f"{progress_interval_s(spec.shards):g}"}]
    if barrier_on(spec):
        timeout = 600 if spec.start_barrier is None else spec.start_barrier.timeout_seconds
        env += [
            {"name": ENV_START_BARRIER, "value": BARRIER_FIRST_LEVEL if first_level_only(spec) else "1"},
            {"name": ENV_BARRIER_TIMEOUT, "value": str(timeout)},
        ]
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [*container["env"], *env]
    return job


def _mac(body: Mapping[str, Any], key: bytes) -> str:
    data = {k: v for k, v in body.items() if k != "hmac"}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


def sign(body: Mapping[str, Any], key: bytes) -> str:
    """A report as its shard writes it: canonical JSON with an HMAC-SHA256 over the rest."""
    data = {k: v for k, v in body.items() if k != "hmac"}
    return json.dumps({**data, "hmac": _mac(data, key)}, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class ShardProgress:
    index: int
    state: str
    level: int
    levels: int
    sent: int
    completed: int
    errors: int
    in_flight: int
    rate_rps: float
    eta_s: float | None
    at_ms: int


def _count(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(name)
    return value


def read_progress(
    text: str | None, key: bytes | None, index: int, pods: Mapping[str, int]
) -> ShardProgress | None:
    """Shard ``index``'s report when it counts (signed with the run's key by that index's pod of
    the Job, ``pods`` mapping pod UIDs to indices, within its size bound), else None."""
    if not text or key is None or len(text.encode()) > PROGRESS_LIMIT_BYTES:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("hmac"), str):
        return None
    if not hmac.compare_digest(str(data["hmac"]), _mac(data, key)):
        return None
    if data.get("shard") != index or pods.get(str(data.get("podUid"))) != index:
        return None
    try:
        eta = data.get("etaSeconds")
        rate = data.get("rateRps", 0.0)
        if data.get("state") not in STATES or not isinstance(rate, int | float):
            return None
        return ShardProgress(
            index=index,
            state=str(data["state"]),
            level=_count(data, "level"),
            levels=_count(data, "levels"),
            sent=_count(data, "sent"),
            completed=_count(data, "completed"),
            errors=_count(data, "errors"),
            in_flight=_count(data, "inFlight"),
            rate_rps=float(rate),
            eta_s=float(eta) if isinstance(eta, int | float) and eta >= 0 else None,
            at_ms=_count(data, "atMs"),
        )
    except (KeyError, ValueError):
        return None


def live_shards(shards: int, pods: list[Any], job_uid: str) -> set[int]:
    """Indices that may still run: all but those whose every pod (of the Job) has ended."""
    ended: dict[int, bool] = {}
    for pod in pods:
        owners = pod.metadata.owner_references or []
        if not any(o.controller and o.uid == job_uid for o in owners):
            continue
        index = (pod.metadata.annotations or {}).get("batch.kubernetes.io/job-completion-index", "")
        if not index.isdigit():
            continue
        done = pod.status is not None and pod.status.phase in ("Succeeded", "Failed")
        ended[int(index)] = ended.get(int(index), True) and done
    return {i for i in range(shards) if not ended.get(i, False)}


def level_to_release(
    progress: Mapping[int, ShardProgress], live: set[int], released: Mapping[int, int]
) -> int | None:
    """The level every live shard waits at, when its start time is not written yet."""
    if not live:
        return None
    levels = set()
    for index in live:
        report = progress.get(index)
        if report is None or report.state != WAITING:
            return None
        levels.add(report.level)
    if len(levels) != 1:
        return None
    level = levels.pop()
    return None if level in released else level


def parse_starts(text: str | None, key: bytes | None) -> dict[int, int]:
    """The start object's levels (index -> Unix ns) when the operator signed them with the run's
    key; anything unreadable or unsigned is no start at all (a user who may write ConfigMaps set
    a start an hour ahead and stalled the run: shards take the operator's word only)."""
    try:
        data = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    if key is None or not isinstance(data, dict) or not isinstance(data.get("hmac"), str):
        return {}
    if not hmac.compare_digest(str(data["hmac"]), _mac(data, key)):
        return {}
    levels = data.get("levels")
    if not isinstance(levels, dict):
        return {}
    return {int(k): v for k, v in levels.items() if k.isdigit() and isinstance(v, int) and v > 0}


def starts_text(starts: Mapping[int, int], key: bytes) -> str:
    """The start object's content, signed with the run's key."""
    return sign({"levels": {str(k): v for k, v in sorted(starts.items())}}, key)


MAX_AHEAD_NS = 30_000_000_000  # a signed start further ahead than this is refused all the same


def start_problem(start_ns: int, now_ns: int) -> str | None:
    """Why a shard must not wait for this start: further ahead than the barrier ever sets one
    (``LEAD_NS``, with room for clocks and a slow API), None when it may."""
    ahead = start_ns - now_ns
    if ahead > MAX_AHEAD_NS:
        return f"a start {ahead / 1e9:.0f} s ahead (the barrier sets {LEAD_NS / 1e9:g} s)"
    return None


def sound_starts(starts: Mapping[int, int], now_ns: int) -> tuple[dict[int, int], dict[int, str]]:
    """The starts the operator stands by, and why it drops the others: a validly signed start
    further ahead than the barrier ever sets one (a Secret reader's, an hour out) is the same
    stall to the operator as to the shards, so its level is opened again with a start of the
    operator's own."""
    kept, dropped = {}, {}
    for level, start_ns in starts.items():
        problem = start_problem(start_ns, now_ns)
        if problem is None:
            kept[level] = start_ns
        else:
            dropped[level] = problem
    return kept, dropped


def _iso_ms(unix_ns: int) -> str:
    return (
        datetime.fromtimestamp(unix_ns / 1e9, tz=UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def barrier_text(
    progress: Mapping[int, ShardProgress], live: set[int], released: Mapping[int, int], levels: int
) -> str:
    waiting = [p for i, p in progress.items() if i in live and p.state == WAITING]
    if not waiting:
        return ""
    level = min(p.level for p in waiting)
    if level in released:
        return f"level {level + 1}/{levels} starts at {_iso_ms(released[level])}"
    count = sum(1 for p in waiting if p.level == level)
    return f"level {level + 1}/{levels}: {count} of {len(live)} running shard(s) ready, waiting for the rest"


def progress_status(
    progress: Mapping[int, ShardProgress], live: set[int], released: Mapping[int, int]
) -> BenchmarkProgress | None:
    """What the status says while the run goes on, summed over the shards whose reports count;
    None before any shard has reported."""
    if not progress:
        return None
    reports = list(progress.values())
    levels = max(p.levels for p in reports)
    behind = [p for p in reports if p.state != FINISHED]
    shown = min(p.level for p in behind) + 1 if behind else levels
    etas = [p.eta_s for p in reports if p.eta_s is not None]
    running = [p for p in reports if p.state == RUNNING]
    return BenchmarkProgress(
        level=f"{shown}/{levels}",
        sent=sum(p.sent for p in reports),
        completed=sum(p.completed for p in reports),
        errors=sum(p.errors for p in reports),
        in_flight=sum(p.in_flight for p in reports),
        rate_rps=f"{sum(p.rate_rps for p in running):.2f}" if running else "n/a",
        eta_seconds=round(max(etas)) if etas else None,
        shards_reporting=len(reports),
        barrier=barrier_text(progress, live, released, levels),
        updated_at=_iso_ms(max(p.at_ms for p in reports) * 1_000_000),
    )
