"""API write availability during a control-plane fault: a small ConfigMap of the drill's own is
patched every 50 ms from before the fault until its hold ends, each write with its start, end
and outcome; the figure is the longest time writes did not succeed: from the start of a write to
the end of the first successful one, the failed attempts in between included. A leader change
that only stalls writes shows as a slow write, one that fails them as a failed stretch.

Writes go straight through the client with a short time-out and no retries, so an outage is
seen as it is rather than smoothed over. The ConfigMap's name is in the fault's undo data:
reverting the fault deletes it, on every path.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mcp_checks.api import Verdict

from ...api.drill import KpiThresholds
from .kpi import KpiResult, seconds_kpi

INTERVAL_S = 0.05
RETRY_AFTER_FAILURE_S = 0.02
TIMEOUT_S = 2.0
PROBE_LABEL = "mcp2026.io/write-probe"


@dataclass(frozen=True)
class Write:
    start: float  # time.time()
    end: float
    ok: bool


@dataclass
class WriteRecord:
    writes: list[Write] = field(default_factory=list)
    keep: bool = True  # False: the fault was refused, so the writes measured nothing


async def _create(core: client.CoreV1Api, namespace: str, name: str) -> None:
    body = {"metadata": {"name": name, "labels": {PROBE_LABEL: "true"}}, "data": {"seq": "0"}}
    try:
        await asyncio.to_thread(
            core.create_namespaced_config_map, namespace, body, _request_timeout=TIMEOUT_S
        )
    except ApiException as exc:
        if exc.status != 409:
            raise


async def run_write_probe(
    api: client.ApiClient, namespace: str, name: str, record: WriteRecord, stop: asyncio.Event
) -> None:
    """Create the probe ConfigMap, then write it until ``stop``. ``record`` is filled as it goes."""
    core = client.CoreV1Api(api)
    await _create(core, namespace, name)
    seq = 0
    while not stop.is_set():
        seq += 1
        start = time.time()
        try:
            await asyncio.to_thread(
                core.patch_namespaced_config_map,
                name,
                namespace,
                {"data": {"seq": str(seq)}},
                _request_timeout=TIMEOUT_S,
            )
            ok = True
        except Exception:  # any failure is what is measured: an error, a refusal, a time-out
            ok = False
        record.writes.append(Write(start, time.time(), ok))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), INTERVAL_S if ok else RETRY_AFTER_FAILURE_S)


def longest_outage(writes: Sequence[Write]) -> float | None:
    """Seconds of the longest wait from starting a write to having one succeed (a write's own
    time when it succeeds at once); None when the record ends in failures (writes never came
    back within it)."""
    worst, since = 0.0, None
    for write in writes:
        since = write.start if since is None else since
        if write.ok:
            worst = max(worst, write.end - since)
            since = None
    return None if since is not None else worst


def failed(writes: Sequence[Write]) -> int:
    return sum(not w.ok for w in writes)


@dataclass(frozen=True)
class FaultWrites:
    evidence: str  # which fault, in which stage
    writes: tuple[Write, ...]


def write_outage_kpi(faults: Sequence[FaultWrites], t: KpiThresholds) -> KpiResult | None:
    if not faults:
        return None
    limit = f"<= {t.write_outage_seconds:g} s"
    empty = [f.evidence for f in faults if not f.writes]
    if empty:
        why = f"no API write was attempted during {empty[0]}"
        return KpiResult("writeOutageSeconds", Verdict.INCONCLUSIVE, "NoWrites", why, limit)
    values = [
        (f"{f.evidence}: {failed(f.writes)} of {len(f.writes)} writes failed", longest_outage(f.writes))
        for f in faults
    ]
    return seconds_kpi(
        "writeOutageSeconds", values, t.write_outage_seconds, t.write_outage_seconds_warn, "NeverWritable"
    )
