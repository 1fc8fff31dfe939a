"""HTTP health probe round: success ratio and latency percentiles against thresholds.

A round sends a fixed number of requests with bounded concurrency and records every one.
Percentiles are exact (nearest rank over all samples): a probe round is small, so there is
no reason to approximate.
"""

from __future__ import annotations

import asyncio
import errno
import math
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp

from .dialhooks import SocketFactory
from .prober_lag import LoopLag, LoopLagMonitor
from .specs import HealthProbe
from .verdict import CheckOutcome, Verdict

CHECK_NAME = "health-probe"
_DEFAULT = HealthProbe()


@dataclass(frozen=True)
class HealthProbeSpec:
    """One resolved probe round; its defaults are ``specs.HealthProbe``'s (``from_spec``)."""

    url: str
    requests: int = _DEFAULT.requests
    concurrency: int = _DEFAULT.concurrency
    timeout_s: float = _DEFAULT.timeout_ms / 1000.0
    expected_status: tuple[int, ...] = tuple(_DEFAULT.expected_status)
    min_success_ratio: float = _DEFAULT.min_success_ratio
    max_p50_ms: float | None = _DEFAULT.max_p50_ms
    max_p99_ms: float | None = _DEFAULT.max_p99_ms
    max_round_ms: float | None = _DEFAULT.max_round_ms
    # warn bands: inside the limits but close to them (the KPI board's second state)
    warn_success_ratio: float | None = _DEFAULT.warn_success_ratio
    warn_p99_ms: float | None = _DEFAULT.warn_p99_ms
    # the prober's own loop lag (P99) above which a round is no evidence either way; None: a
    # tenth of the tightest latency limit (see ``lag_limit_ms``)
    max_prober_lag_ms: float | None = _DEFAULT.max_prober_lag_ms
    # every connection through it (the operator's target policy, on the address connected to)
    socket_factory: SocketFactory | None = field(default=None, compare=False)

    @classmethod
    def from_spec(
        cls, spec: HealthProbe, url: str, socket_factory: SocketFactory | None = None
    ) -> HealthProbeSpec:
        """The round a typed spec asks for, against ``url`` (the target joined with its path)."""
        return cls(
            url=url,
            requests=spec.requests,
            concurrency=spec.concurrency,
            timeout_s=spec.timeout_ms / 1000.0,
            expected_status=tuple(spec.expected_status),
            min_success_ratio=spec.min_success_ratio,
            max_p50_ms=spec.max_p50_ms,
            max_p99_ms=spec.max_p99_ms,
            max_round_ms=spec.max_round_ms,
            warn_success_ratio=spec.warn_success_ratio,
            warn_p99_ms=spec.warn_p99_ms,
            max_prober_lag_ms=spec.max_prober_lag_ms,
            socket_factory=socket_factory,
        )


@dataclass
class ProbeSamples:
    latencies_ms: list[float] = field(default_factory=list)  # successful probes only
    failures: Counter[str] = field(default_factory=Counter)
    round_ms: float = 0.0
    lag: LoopLag = field(default_factory=LoopLag)

    @property
    def total(self) -> int:
        return len(self.latencies_ms) + sum(self.failures.values())

    @property
    def success_ratio(self) -> float:
        return len(self.latencies_ms) / self.total if self.total else 0.0


def required_samples(min_success_ratio: float) -> int | None:
    """Probes needed before one failure could still leave the ratio at or above the threshold.

    With fewer, a single failure fails the check and all-pass proves less than asked, so the
    threshold cannot be verified by that round. One rule for every ratio: 1.0 would need an
    endless round (one more probe could always fail), so no round verifies it: None.
    """
    if min_success_ratio >= 1.0:
        return None
    if min_success_ratio <= 0.0:
        return 1
    return math.ceil(round(1.0 / (1.0 - min_success_ratio), 6))


LAG_SHARE = 0.1  # a prober late by a tenth of a latency limit can move a figure across it
MIN_LAG_LIMIT_MS = 10.0
NO_LATENCY_LIMIT_LAG_MS = 100.0


def lag_limit_ms(spec: HealthProbeSpec) -> float:
    """How late the prober's loop may run before a round proves nothing: as asked, else a tenth
    of the tightest latency limit (at least 10 ms), else 100 ms (then only time-outs could move)."""
    if spec.max_prober_lag_ms is not None:
        return spec.max_prober_lag_ms
    limits = [v for v in (spec.max_p50_ms, spec.max_p99_ms, spec.max_round_ms) if v is not None]
    if not limits:
        return NO_LATENCY_LIMIT_LAG_MS
    return max(MIN_LAG_LIMIT_MS, LAG_SHARE * min(limits))


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        raise ValueError("no samples")
    # round first: in binary floating point 99.9% of 1000 is 999.0000000000001, not rank 999
    rank = max(1, math.ceil(round(pct * len(sorted_values) / 100.0, 9)))
    return sorted_values[rank - 1]


def _classify(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        # EACCES: refused before connecting (the target policy, where the operator set one)
        return "not_allowed" if exc.os_error.errno == errno.EACCES else "connect"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "disconnected"
    if isinstance(exc, aiohttp.ClientError):
        return "client_error"
    return type(exc).__name__


async def probe(spec: HealthProbeSpec) -> ProbeSamples:
    samples = ProbeSamples()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(spec.requests):
        queue.put_nowait(i)
    timeout = aiohttp.ClientTimeout(total=spec.timeout_s)
    connector = aiohttp.TCPConnector(
        limit=spec.concurrency, force_close=False, socket_factory=spec.socket_factory
    )

    async def worker(session: aiohttp.ClientSession) -> None:
        while True:
            try:
                queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            started = time.perf_counter()
            try:
                async with session.get(spec.url) as resp:
                    await resp.read()
                    status = resp.status
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                samples.failures[_classify(exc)] += 1
                continue
            elapsed_ms = (time.perf_counter() - started) * 1000.0
            if status in spec.expected_status:
                samples.latencies_ms.append(elapsed_ms)
            else:
                samples.failures[f"http_{status}"] += 1

    round_start = time.perf_counter()
    async with (
        LoopLagMonitor() as lag,
        aiohttp.ClientSession(timeout=timeout, connector=connector) as session,
    ):
        await asyncio.gather(*(worker(session) for _ in range(min(spec.concurrency, spec.requests))))
    samples.round_ms = (time.perf_counter() - round_start) * 1000.0
    samples.lag = lag
    return samples


def _fmt_ms(value: float) -> str:
    return f"{value:.2f}ms"


def evaluate(spec: HealthProbeSpec, samples: ProbeSamples) -> CheckOutcome:
    """Compare one round with the thresholds; every branch says what it saw."""
    thresholds = {"minSuccessRatio": f"{spec.min_success_ratio}"}
    if spec.max_p50_ms is not None:
        thresholds["maxP50"] = _fmt_ms(spec.max_p50_ms)
    if spec.max_p99_ms is not None:
        thresholds["maxP99"] = _fmt_ms(spec.max_p99_ms)
    if spec.max_round_ms is not None:
        thresholds["maxRound"] = _fmt_ms(spec.max_round_ms)
    if spec.warn_success_ratio is not None:
        thresholds["warnSuccessRatio"] = f"{spec.warn_success_ratio}"
    if spec.warn_p99_ms is not None:
        thresholds["warnP99"] = _fmt_ms(spec.warn_p99_ms)
    observed = {
        "requests": str(samples.total),
        "succeeded": str(len(samples.latencies_ms)),
        "successRatio": f"{samples.success_ratio:.6f}",
        "round": _fmt_ms(samples.round_ms),
    }
    if samples.failures:
        observed["failures"] = ", ".join(f"{k}={v}" for k, v in sorted(samples.failures.items()))
    lag_p99, lag_max = samples.lag.percentile(99), samples.lag.max_ms
    lag_limit = lag_limit_ms(spec)
    if lag_p99 is not None and lag_max is not None:
        observed.update({"proberLagP99": _fmt_ms(lag_p99), "proberLagMax": _fmt_ms(lag_max)})
        thresholds["maxProberLagP99"] = _fmt_ms(lag_limit)

    def outcome(kind: Verdict, reason: str, message: str) -> CheckOutcome:
        # A late prober only makes figures worse (later stamps, time-outs), never better: a Pass
        # under lag is still a pass, and refused connections are refused at any lag. A Fail, a
        # Warn or a time-out Error may be the prober's own doing, so it is no evidence.
        refused = kind == Verdict.ERROR and set(samples.failures) <= {"connect", "not_allowed"}
        sound = kind in (Verdict.PASS, Verdict.INCONCLUSIVE) or refused
        if lag_p99 is not None and lag_p99 > lag_limit and not sound:
            return CheckOutcome(
                CHECK_NAME,
                Verdict.INCONCLUSIVE,
                "ProberOverloaded",
                f"the prober's own loop ran {_fmt_ms(lag_p99)} late at P99 (limit "
                f"{_fmt_ms(lag_limit)}), so this round is no evidence; it would have been "
                f"{kind.value} ({reason}: {message})",
                observed,
                thresholds,
            )
        return CheckOutcome(CHECK_NAME, kind, reason, message, observed, thresholds)

    if samples.total == 0:
        return outcome(Verdict.INCONCLUSIVE, "NoSamples", "the probe round sent no requests")
    if samples.failures.get("not_allowed"):  # no figure of the target's: its address was refused
        return outcome(
            Verdict.ERROR,
            "TargetNotAllowed",
            f"{samples.failures['not_allowed']} of {samples.total} probes of {spec.url} were refused "
            "before connecting: the address reached is one the target policy refuses",
        )
    if not samples.latencies_ms:
        connectish = {"connect", "timeout", "disconnected", "client_error"}
        if set(samples.failures) <= connectish:
            return outcome(
                Verdict.ERROR,
                "TargetUnreachable",
                f"none of {samples.total} probes of {spec.url} got an answer ({observed['failures']})",
            )
        return outcome(
            Verdict.FAIL,
            "HealthBelowThreshold",
            f"none of {samples.total} probes succeeded ({observed['failures']})",
        )
    ordered = sorted(samples.latencies_ms)
    p50, p99 = percentile(ordered, 50), percentile(ordered, 99)
    observed.update({"p50": _fmt_ms(p50), "p90": _fmt_ms(percentile(ordered, 90)), "p99": _fmt_ms(p99)})
    if samples.success_ratio < spec.min_success_ratio:
        return outcome(
            Verdict.FAIL,
            "HealthBelowThreshold",
            f"success ratio {samples.success_ratio:.4%} is below {spec.min_success_ratio:.4%}",
        )
    breaches = []
    if spec.max_p50_ms is not None and p50 > spec.max_p50_ms:
        breaches.append(f"P50 {_fmt_ms(p50)} > {_fmt_ms(spec.max_p50_ms)}")
    if spec.max_p99_ms is not None and p99 > spec.max_p99_ms:
        breaches.append(f"P99 {_fmt_ms(p99)} > {_fmt_ms(spec.max_p99_ms)}")
    if spec.max_round_ms is not None and samples.round_ms > spec.max_round_ms:
        breaches.append(f"round {_fmt_ms(samples.round_ms)} > {_fmt_ms(spec.max_round_ms)}")
    if breaches:
        return outcome(Verdict.FAIL, "LatencyAboveThreshold", "; ".join(breaches))
    needed = required_samples(spec.min_success_ratio)
    if needed is None or samples.total < needed:
        return outcome(
            Verdict.INCONCLUSIVE,
            "InsufficientSamples",
            f"{samples.total} probes cannot verify a success ratio of {spec.min_success_ratio}; "
            + (f"at least {needed} are needed" if needed else "no finite round can (0.9999 needs 10,000)"),
        )
    warnings = []
    if spec.warn_success_ratio is not None and samples.success_ratio < spec.warn_success_ratio:
        warnings.append(
            f"success ratio {samples.success_ratio:.4%} is below the warn band {spec.warn_success_ratio:.4%}"
        )
    if spec.warn_p99_ms is not None and p99 > spec.warn_p99_ms:
        warnings.append(f"P99 {_fmt_ms(p99)} is above the warn band {_fmt_ms(spec.warn_p99_ms)}")
    if warnings:
        return outcome(Verdict.WARN, "NearThreshold", "; ".join(warnings) + " (within the limits)")
    return outcome(
        Verdict.PASS,
        "HealthProbePassed",
        f"{len(samples.latencies_ms)}/{samples.total} probes succeeded, P99 {_fmt_ms(p99)}",
    )


async def run_health_probe(spec: HealthProbeSpec) -> CheckOutcome:
    return evaluate(spec, await probe(spec))


def run_health_probe_blocking(spec: HealthProbeSpec) -> CheckOutcome:
    """One round on an event loop of its own: the entry point for a worker process, so the
    caller's own load never lands in the figures."""
    return asyncio.run(run_health_probe(spec))
