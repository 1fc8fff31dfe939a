"""The latency model: FIFO admission under a capacity limit, and observable queueing."""

from __future__ import annotations

import asyncio
import itertools
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_bench.workload import FixedDist
from mcp_refserver import RefServerConfig, start_refserver
from mcp_refserver.model import Fault, FifoGate, ServerModel

pytestmark = pytest.mark.timing  # run under load by `make test-stress`


async def test_gate_is_fifo_and_survives_cancelled_waiters() -> None:
    gate = FifoGate(1)
    order: list[str] = []

    async def worker(name: str) -> None:
        await gate.acquire()
        order.append(name)

    await gate.acquire()  # held by the test
    tasks = {n: asyncio.create_task(worker(n)) for n in "BCD"}
    await asyncio.sleep(0)
    assert (gate.running, gate.waiting) == (1, 3)
    tasks["C"].cancel()
    await asyncio.sleep(0)
    assert gate.waiting == 2
    gate.release()
    await tasks["B"]
    gate.release()
    await tasks["D"]
    assert order == ["B", "D"]
    gate.release()
    assert (gate.running, gate.waiting) == (0, 0)


async def test_unlimited_gate_never_waits() -> None:
    gate = FifoGate(0)
    for _ in range(100):
        await gate.acquire()
    assert (gate.running, gate.waiting) == (100, 0)


def test_fault_draws_follow_rates_and_seed() -> None:
    cfg = RefServerConfig.model_validate({"faults": {"error_rate": 0.25, "truncate_rate": 0.25}, "seed": 9})
    a = [ServerModel(cfg).plan().fault for _ in range(1)]
    m1, m2 = ServerModel(cfg), ServerModel(cfg)
    draws1 = [m1.plan().fault for _ in range(400)]
    draws2 = [m2.plan().fault for _ in range(400)]
    assert draws1 == draws2 and a[0] == draws1[0]  # seeded: reproducible
    errors, truncs = draws1.count(Fault.ERROR), draws1.count(Fault.TRUNCATE)
    assert 60 < errors < 140  # ~100 of 400
    assert 40 < truncs < 120  # ~0.75 * 0.25 * 400 = 75
    assert draws1.count(Fault.NONE) == 400 - errors - truncs


def test_distribution_delays_are_drawn_per_request() -> None:
    cfg = RefServerConfig.model_validate({"ttft_ms": "uniform:10:30", "tpot_ms": 4, "seed": 1})
    m = ServerModel(cfg)
    plans = [m.plan() for _ in range(200)]
    ttfts = [p.ttft_ns / 1e6 for p in plans]
    assert min(ttfts) >= 10 and max(ttfts) <= 30 and len(set(ttfts)) > 100
    assert {p.tpot_ns for p in plans} == {4_000_000}
    assert cfg.tpot_ms == FixedDist(value=4)


async def test_capacity_queues_requests_in_order() -> None:
    service_ms = 60.0
    cfg = RefServerConfig(ttft_ms=service_ms, tpot_ms=0, default_max_tokens=1, capacity=1)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:

        async def one() -> int:
            async with s.post(srv.url + "/v1/completions", json={"model": "refmodel", "prompt": "p"}) as r:
                await r.read()
                return r.status

        tasks = [asyncio.create_task(one()) for _ in range(3)]
        waiting = running = -1.0
        for _ in range(200):  # bounded poll until all three have arrived
            async with s.get(srv.url + "/metrics") as r:
                text = await r.text()
            values = {x.name: x.value for f in text_string_to_metric_families(text) for x in f.samples}
            waiting, running = values["vllm:num_requests_waiting"], values["vllm:num_requests_running"]
            if waiting == 2:
                break
            await asyncio.sleep(0.002)
        assert (running, waiting) == (1.0, 2.0)
        assert await asyncio.gather(*tasks) == [200, 200, 200]
        served = sorted(srv.model.timings, key=lambda t: t.arrival_unix_ns)
        arrived = [(t.arrival_unix_ns - served[0].arrival_unix_ns) / 1e6 for t in served]
        queues = [t.queue_ns / 1e6 for t in served]
        # A slot cannot free before one service time has passed since the first arrival: the
        # n-th request queues at least n services less how much later than the first it came
        # (on a busy host the three arrive milliseconds apart)
        assert queues[0] < service_ms / 2
        assert queues[1] >= service_ms - arrived[1] - 1, (queues, arrived)
        assert queues[2] >= 2 * service_ms - arrived[2] - 1, (queues, arrived)
        ttfts = [t.ttft_ns / 1e6 for t in served]
        assert ttfts[2] >= 3 * service_ms - arrived[2] - 1  # TTFT includes the queueing, as vLLM's
        stats = srv.model.stats
        assert stats.queue.count == 3 and stats.queue.ns == pytest.approx(sum(queues) * 1e6, rel=1e-6)


async def test_timings_carry_every_chunk_write_and_its_lateness() -> None:
    """The inter-token truth: one write per chunk, gaps of about TPOT, lateness beside each."""
    config = RefServerConfig(ttft_ms=FixedDist(value=5.0), tpot_ms=FixedDist(value=4.0))
    async with await start_refserver(config) as srv, aiohttp.ClientSession() as s:
        body = {"model": "refmodel", "prompt": "p", "max_tokens": 6, "stream": True}
        before = time.time_ns()
        for _ in range(2):
            async with s.post(srv.url + "/v1/completions", json=body) as r:
                await r.read()
        t, _ = srv.model.timings
        assert len(t.chunk_ns) == len(t.late_ns) == 6
        assert t.chunk_ns[0] == t.ttft_ns and t.chunk_ns[-1] == t.e2e_ns
        async with s.get(srv.url + "/debug/timings?reset=1") as r:
            timings = await r.json()
        assert before <= timings["arrival_unix_ns"][0] <= timings["arrival_unix_ns"][1] <= time.time_ns()
        assert [len(c) for c in timings["chunks_ms"]] == [len(x) for x in timings["late_ms"]] == [6, 6]
        chunks = timings["chunks_ms"][0]
        assert chunks[0] == pytest.approx(timings["ttft_ms"][0]) and chunks[-1] == timings["e2e_ms"][0]
        assert all(done > e2e for done, e2e in zip(timings["done_ms"], timings["e2e_ms"], strict=True))
        # the writes follow absolute deadlines, so a gap strays from TPOT only by two lateness figures
        spread = 2 * max(abs(x) for late in timings["late_ms"] for x in late)
        gaps = [b - a for c in timings["chunks_ms"] for a, b in itertools.pairwise(c)]
        assert len(gaps) == 10 and all(abs(gap - 4.0) <= spread + 1e-6 for gap in gaps)
        assert not srv.model.timings
