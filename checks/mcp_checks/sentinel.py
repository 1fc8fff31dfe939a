"""A sentinel probe that runs through a whole drill: one small request every ``interval_s``,
each answer kept with its time, so that what clients saw while faults were in place can be
judged afterwards (success share, and how long recovery took after each fault).

Recovery is measured, not assumed: from the first failure the fault caused (not from the
injection: clients may keep succeeding for seconds before a fault bites) to the start of a clean
window, every probe for ``window_s`` successful, that begins after the last failure of that
outage. A fault after which the service never recovered within the record has no recovery time,
and that is reported as such, never as zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import aiohttp

from .dialhooks import OPEN, DialHooks


@dataclass(frozen=True)
class Sample:
    at: float  # time.time() when the probe was sent
    ok: bool
    latency_ms: float


@dataclass
class SentinelRecord:
    samples: list[Sample] = field(default_factory=list)

    def between(self, start: float, end: float) -> list[Sample]:
        return [s for s in self.samples if start <= s.at < end]

    def success_ratio(self, start: float = 0.0, end: float = float("inf")) -> float | None:
        chosen = self.between(start, end)
        return None if not chosen else sum(s.ok for s in chosen) / len(chosen)

    def recovery_seconds(self, since: float, window_s: float) -> float | None:
        """Seconds from ``since`` to the first sample from which every sample of the next
        ``window_s`` succeeded (and at least one sample exists after that window); None when
        the record shows no such moment."""
        after = [s for s in self.samples if s.at >= since]
        for i, first in enumerate(after):
            if not first.ok:
                continue
            horizon = first.at + window_s
            window = [s for s in after[i:] if s.at < horizon]
            beyond = any(s.at >= horizon for s in after[i:])
            if beyond and all(s.ok for s in window):
                return max(0.0, first.at - since)
        return None

    def outage_recovery(self, since: float, until: float, window_s: float) -> tuple[bool, float | None]:
        """(whether a probe failed in ``[since, until)``, the seconds from that first failure to
        the start of the first clean window after it). A fault's outage may begin late and
        flap: failures closer together than ``window_s`` are one outage, timed whole."""
        first = self.first_failure(since, until)
        if first is None:
            return False, 0.0
        return True, self.recovery_seconds(first, window_s)

    def first_failure(self, since: float, until: float) -> float | None:
        """When the first failed probe after ``since`` was sent (None: none failed)."""
        return next((s.at for s in self.samples if since <= s.at < until and not s.ok), None)


async def run_sentinel(
    url: str,
    record: SentinelRecord,
    stop: asyncio.Event,
    interval_s: float = 0.1,
    timeout_s: float = 1.0,
    dial: DialHooks = OPEN,
) -> None:
    """Probe ``url`` until ``stop`` is set, appending every answer (a fresh connection each time,
    so a dead backend behind a proxy is seen at once rather than hidden by a kept-alive one;
    each through ``dial``, the operator's target policy)."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    connector = dial.connector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        while not stop.is_set():
            sent_wall, started = time.time(), time.perf_counter()
            try:
                async with session.get(url) as resp:
                    await resp.read()
                    ok = 200 <= resp.status < 300
            except (TimeoutError, aiohttp.ClientError, OSError):
                ok = False
            record.samples.append(Sample(sent_wall, ok, (time.perf_counter() - started) * 1000.0))
            remaining = interval_s - (time.perf_counter() - started)
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), remaining)
