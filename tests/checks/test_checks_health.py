"""HTTP health probe rounds against a real loopback server, and the statistics behind them.

The server (aiohttp, 127.0.0.1, any free port): ``/ok`` answers 200; ``/status/{code}`` answers
that code; ``/flaky/{every}`` answers 503 to every ``every``-th request and 200 otherwise (an
exact failure share); ``/sleep/{ms}`` answers 200 after ``ms`` milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import random
import socket
import threading
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiohttp import web
from tests.httpserve import send_json, serving

from mcp_checks.health import (
    HealthProbeSpec,
    ProbeSamples,
    evaluate,
    percentile,
    probe,
    required_samples,
    run_health_probe,
    run_health_probe_blocking,
)
from mcp_checks.verdict import Verdict


@dataclass
class ProbeTarget:
    url: str = ""
    hits: Counter[str] = field(default_factory=Counter)


@pytest.fixture
async def probe_target() -> AsyncIterator[ProbeTarget]:
    target = ProbeTarget()

    async def ok(request: web.Request) -> web.Response:
        target.hits["ok"] += 1
        return web.Response(text="ok")

    async def status(request: web.Request) -> web.Response:
        target.hits["status"] += 1
        return web.Response(status=int(request.match_info["code"]))

    async def flaky(request: web.Request) -> web.Response:
        target.hits["flaky"] += 1
        every = int(request.match_info["every"])
        return web.Response(status=503 if target.hits["flaky"] % every == 0 else 200)

    async def sleep(request: web.Request) -> web.Response:
        target.hits["sleep"] += 1
        await asyncio.sleep(float(request.match_info["ms"]) / 1000)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/ok", ok)
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/flaky/{every}", flaky)
    app.router.add_get("/sleep/{ms}", sleep)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    target.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield target
    finally:
        await runner.cleanup()


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spec(url: str, **kw: Any) -> HealthProbeSpec:
    """The target server shares the test's event loop; on a busy machine that loop runs late, so
    the prober-lag guard is set wide here and tested on its own below."""
    base: dict[str, Any] = {
        "requests": 200,
        "concurrency": 8,
        "timeout_s": 2.0,
        "min_success_ratio": 0.995,
        "max_prober_lag_ms": 1000.0,
    }
    return HealthProbeSpec(url=url, **(base | kw))


async def test_all_healthy_passes_with_the_exact_sample_count(probe_target: ProbeTarget) -> None:
    outcome = await run_health_probe(_spec(probe_target.url + "/ok"))
    assert (outcome.outcome, outcome.reason) == (Verdict.PASS, "HealthProbePassed")
    assert probe_target.hits["ok"] == 200  # every probe sent once, none lost, none extra
    assert outcome.observed["requests"] == outcome.observed["succeeded"] == "200"
    assert outcome.observed["successRatio"] == "1.000000"
    assert "failures" not in outcome.observed
    assert {"p50", "p90", "p99", "round"} <= outcome.observed.keys()
    assert outcome.thresholds == {
        "minSuccessRatio": "0.995",
        "maxP99": "500.00ms",
        "maxProberLagP99": "1000.00ms",
    }
    assert outcome.name == "health-probe" and outcome.measured_at.endswith("Z")


async def test_a_share_of_503_fails_health(probe_target: ProbeTarget) -> None:
    outcome = await run_health_probe(
        _spec(probe_target.url + "/flaky/10", requests=100, min_success_ratio=0.99)
    )
    assert (outcome.outcome, outcome.reason) == (Verdict.FAIL, "HealthBelowThreshold")
    assert outcome.observed["failures"] == "http_503=10"
    assert outcome.observed["successRatio"] == "0.900000"
    assert "90.0000%" in outcome.message and "99.0000%" in outcome.message


async def test_slow_answers_fail_the_p99_threshold(probe_target: ProbeTarget) -> None:
    spec = _spec(
        probe_target.url + "/sleep/50", requests=20, concurrency=10, min_success_ratio=0.95, max_p99_ms=10
    )
    outcome = await run_health_probe(spec)
    assert (outcome.outcome, outcome.reason) == (Verdict.FAIL, "LatencyAboveThreshold")
    p99 = float(outcome.observed["p99"].removesuffix("ms"))
    assert p99 >= 50.0
    assert "P99" in outcome.message and "> 10.00ms" in outcome.message


async def test_p50_and_round_thresholds(probe_target: ProbeTarget) -> None:
    spec = _spec(
        probe_target.url + "/sleep/20",
        requests=10,
        concurrency=1,
        min_success_ratio=0.9,
        max_p50_ms=5,
        max_round_ms=50,
    )
    outcome = await run_health_probe(spec)
    assert outcome.reason == "LatencyAboveThreshold"
    # ten sequential 20 ms answers take at least 200 ms
    assert float(outcome.observed["round"].removesuffix("ms")) >= 200.0
    assert "P50" in outcome.message and "round" in outcome.message
    assert outcome.thresholds["maxP50"] == "5.00ms" and outcome.thresholds["maxRound"] == "50.00ms"


async def test_closed_port_is_an_error_not_a_failure(closed_port: int) -> None:
    outcome = await run_health_probe(_spec(f"http://127.0.0.1:{closed_port}/health", requests=20))
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetUnreachable")
    assert outcome.observed["failures"] == "connect=20"
    assert outcome.observed["succeeded"] == "0"


async def test_timeouts_are_counted_as_timeouts(probe_target: ProbeTarget) -> None:
    spec = _spec(
        probe_target.url + "/sleep/2000", requests=4, concurrency=4, timeout_s=0.05, min_success_ratio=0.5
    )
    outcome = await run_health_probe(spec)
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetUnreachable")
    assert outcome.observed["failures"] == "timeout=4"


async def test_only_errors_from_a_live_server_fail(probe_target: ProbeTarget) -> None:
    outcome = await run_health_probe(
        _spec(probe_target.url + "/status/500", requests=20, min_success_ratio=0.9)
    )
    assert (outcome.outcome, outcome.reason) == (Verdict.FAIL, "HealthBelowThreshold")
    assert outcome.observed["failures"] == "http_500=20"


async def test_expected_status_decides_success(probe_target: ProbeTarget) -> None:
    spec = _spec(
        probe_target.url + "/status/204", requests=20, min_success_ratio=0.9, expected_status=(200, 204)
    )
    outcome = await run_health_probe(spec)
    assert outcome.outcome == Verdict.PASS


async def test_too_few_samples_is_inconclusive(probe_target: ProbeTarget) -> None:
    spec = _spec(probe_target.url + "/ok", requests=50, min_success_ratio=0.9999)
    outcome = await run_health_probe(spec)
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "InsufficientSamples")
    assert "at least 10000" in outcome.message
    assert outcome.observed["succeeded"] == "50"  # all passed, and still not a pass


async def test_probe_samples_account_for_every_request(probe_target: ProbeTarget) -> None:
    samples = await probe(_spec(probe_target.url + "/flaky/4", requests=40, concurrency=3))
    assert samples.total == 40
    assert len(samples.latencies_ms) == 30 and samples.failures == Counter({"http_503": 10})
    assert samples.success_ratio == 0.75
    assert all(lat > 0 for lat in samples.latencies_ms) and samples.round_ms > 0


def test_no_samples_is_never_a_pass() -> None:
    outcome = evaluate(HealthProbeSpec(url="http://127.0.0.1:1/"), ProbeSamples())
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "NoSamples")
    assert ProbeSamples().success_ratio == 0.0


def _nearest_rank(values: list[float], pct: float) -> float:
    """Textbook definition, in exact arithmetic: the smallest value with at least pct% at or below."""
    ordered = sorted(values)
    need = Fraction(str(pct)) / 100 * len(ordered)
    for i, value in enumerate(ordered, start=1):
        if i >= need:
            return value
    return ordered[-1]


def test_percentile_nearest_rank_examples() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0 and percentile(values, 0) == 1.0
    five = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert percentile(five, 20) == 10.0 and percentile(five, 21) == 20.0 and percentile(five, 90) == 50.0
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError, match=r"^no samples$"):
        percentile([], 50)


@pytest.mark.parametrize("pct", [7.0, 50.0, 90.0, 95.0, 99.0, 99.9, 99.99])
def test_percentile_matches_the_exact_definition(pct: float) -> None:
    rng = random.Random(int(pct * 100))
    for n in (1, 2, 3, 10, 99, 100, 101, 1000, 2000, 10000):
        values = sorted(rng.uniform(0, 100) for _ in range(n))
        assert percentile(values, pct) == _nearest_rank(values, pct), (pct, n)


@pytest.mark.parametrize(
    ("ratio", "needed"),
    [(0.9999, 10000), (0.999, 1000), (0.99, 100), (0.95, 20), (0.9, 10), (0.5, 2), (1.0, None), (0.0, 1)],
)
def test_required_samples(ratio: float, needed: int | None) -> None:
    assert required_samples(ratio) == needed
    # with that many probes one failure still meets the ratio; with one fewer it cannot
    if 0 < ratio < 1:
        assert (needed - 1) / needed >= ratio - 1e-12
        assert needed == 1 or (needed - 2) / (needed - 1) < ratio


def test_required_samples_is_at_least_the_inverse_failure_share() -> None:
    for ratio in (0.97, 0.993, 0.9995, 0.12345):
        assert required_samples(ratio) == math.ceil(1 / (1 - ratio) - 1e-9)


async def test_an_overloaded_prober_never_fails_a_target(probe_target: ProbeTarget) -> None:
    """Blocking the prober's own loop (as too many rounds in one process do) inflates what it
    measures: a breach it sees is no evidence (Inconclusive with the lag figures), not the Fail
    it would have been; the same round with room under the limit stays a Pass (figures that
    lag can only inflate are upper bounds)."""
    import time as _time

    async def hog() -> None:
        for _ in range(40):
            _time.sleep(0.03)  # the loop cannot wake the prober for 30 ms at a time
            await asyncio.sleep(0)

    tight = _spec(
        probe_target.url + "/ok", requests=400, concurrency=4, max_p99_ms=5.0, max_prober_lag_ms=10.0
    )
    outcome, _ = await asyncio.gather(run_health_probe(tight), hog())
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "ProberOverloaded")
    assert float(outcome.observed["proberLagP99"].removesuffix("ms")) > 10.0
    assert "would have been Fail" in outcome.message and outcome.thresholds["maxProberLagP99"] == "10.00ms"
    roomy = _spec(
        probe_target.url + "/ok", requests=400, concurrency=4, max_p99_ms=1000.0, max_prober_lag_ms=10.0
    )
    passed, _ = await asyncio.gather(run_health_probe(roomy), hog())
    assert passed.outcome == Verdict.PASS
    assert float(passed.observed["proberLagP99"].removesuffix("ms")) > 10.0  # reported all the same


async def test_a_quiet_prober_reports_its_lag_and_judges_the_target(probe_target: ProbeTarget) -> None:
    outcome = await run_health_probe(_spec(probe_target.url + "/ok", max_prober_lag_ms=1000.0))
    assert outcome.outcome == Verdict.PASS
    assert float(outcome.observed["proberLagP99"].removesuffix("ms")) < 1000.0


def test_loop_lag_percentiles() -> None:
    from mcp_checks.prober_lag import LoopLag

    lag = LoopLag([float(v) for v in range(1, 101)])
    assert lag.percentile(99) == 99.0 and lag.percentile(50) == 50.0 and lag.max_ms == 100.0
    assert LoopLag().percentile(99) is None and LoopLag().max_ms is None


def test_the_lag_limit_follows_the_tightest_latency_limit() -> None:
    from mcp_checks.health import lag_limit_ms

    assert lag_limit_ms(HealthProbeSpec(url="u")) == 50.0  # a tenth of the default P99 limit of 500 ms
    assert lag_limit_ms(HealthProbeSpec(url="u", max_p50_ms=20, max_p99_ms=300)) == 10.0  # floor
    assert lag_limit_ms(HealthProbeSpec(url="u", max_p99_ms=None)) == 100.0
    assert lag_limit_ms(HealthProbeSpec(url="u", max_prober_lag_ms=7)) == 7.0


def test_refused_connections_are_evidence_even_from_a_late_prober() -> None:
    from mcp_checks.prober_lag import LoopLag

    samples = ProbeSamples(failures=Counter({"connect": 20}), lag=LoopLag([500.0] * 10))
    outcome = evaluate(HealthProbeSpec(url="http://127.0.0.1:1/", max_prober_lag_ms=10), samples)
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetUnreachable")
    timed_out = ProbeSamples(failures=Counter({"timeout": 20}), lag=LoopLag([500.0] * 10))
    late = evaluate(HealthProbeSpec(url="http://127.0.0.1:1/", max_prober_lag_ms=10), timed_out)
    assert late.reason == "ProberOverloaded"  # a time-out may be the prober's own doing


@contextlib.asynccontextmanager
async def _raw_server(answer: bytes | None) -> AsyncIterator[str]:
    """A TCP server that reads a request and answers ``answer`` verbatim (None: closes at once)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        if answer is not None:
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/health"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("answer", "kind"),
    [(None, "disconnected"), (b"NOT HTTP AT ALL\r\n\r\n", "client_error")],
)
async def test_a_server_that_drops_or_garbles_the_answer_is_unreachable(
    answer: bytes | None, kind: str
) -> None:
    async with _raw_server(answer) as url:
        outcome = await run_health_probe(_spec(url, requests=6, concurrency=2))
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetUnreachable")
    assert outcome.observed["failures"] == f"{kind}=6"


def _refuse_every_address(addr_info: tuple[Any, ...]) -> socket.socket:
    raise OSError(errno.EACCES, f"{addr_info[4][0]} refused by the target policy")


async def test_the_socket_factory_judges_every_connection(probe_target: ProbeTarget) -> None:
    """The operator's target policy rides in ``socket_factory``: a refused address is counted as
    refused, never sent a request, and makes the round an Error, not a failing target."""
    spec = _spec(probe_target.url + "/ok", requests=5, socket_factory=_refuse_every_address)
    outcome = await run_health_probe(spec)
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetNotAllowed")
    assert outcome.observed["failures"] == "not_allowed=5" and probe_target.hits["ok"] == 0


async def test_a_round_keeps_its_connections_alive() -> None:
    """Probes reuse their connections (the figures are the service's answers, not TCP set-up):
    200 probes on 4 workers open a handful of connections, not 200."""
    peers: set[tuple[str, int]] = set()

    async def ok(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername"))  # type: ignore[union-attr]
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/ok", ok)
    async with serving(app) as url:
        outcome = await run_health_probe(_spec(url + "/ok", concurrency=4))
    assert outcome.outcome == Verdict.PASS
    assert 1 <= len(peers) <= 20, len(peers)
    assert float(outcome.observed["round"].removesuffix("ms")) < 60_000  # a duration, not a clock reading


async def test_concurrency_above_the_client_default_is_honoured() -> None:
    """120 probes at concurrency 120 are all in flight at once (aiohttp's own default caps a
    connector at 100): the server holds every answer until 120 requests wait (or 5 s pass)."""
    in_flight, most, everyone = 0, 0, asyncio.Event()

    async def ok(request: web.Request) -> web.Response:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        if in_flight >= 120:
            everyone.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(everyone.wait(), 5.0)
        in_flight -= 1
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/ok", ok)
    async with serving(app) as url:
        outcome = await run_health_probe(
            _spec(url + "/ok", requests=120, concurrency=120, timeout_s=30.0, max_p99_ms=None)
        )
    assert most == 120 and outcome.observed["succeeded"] == "120"


def test_a_blocking_round_runs_on_a_loop_of_its_own() -> None:
    """The entry point of the worker process: a whole round, with no caller's loop."""

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            send_json(self, 200, {"ok": True})

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/ok"
        outcome = run_health_probe_blocking(_spec(url, requests=20, concurrency=2, min_success_ratio=0.9))
    finally:
        server.shutdown()
        server.server_close()
    assert (outcome.outcome, outcome.observed["succeeded"]) == (Verdict.PASS, "20")
