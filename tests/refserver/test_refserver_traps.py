"""The trap knobs of the reference server (each off by default): the dynamic batcher (trap 3), the
paged KV cache with fragmentation (6), strict priorities (8), unfair instances (10), codec time (11)
and the first-hit compile per shape (12)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import aiohttp
import numpy as np
import pytest
import tritonclient.grpc.aio as tgrpc
import tritonclient.http.aio as thttp
from prometheus_client.parser import text_string_to_metric_families

from mcp_refserver import RefServerConfig, start_refserver
from mcp_refserver.__main__ import build_parser, config_from_args
from mcp_refserver.model import FifoGate


async def stats(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url + "/v2/models/refmodel/stats") as r:
        body: dict[str, Any] = await r.json()
    return body["model_stats"][0]


async def metrics(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(url + "/metrics") as r:
        text = await r.text()
    return {f.name: f for f in text_string_to_metric_families(text)}


async def completion(session: aiohttp.ClientSession, url: str, **body: Any) -> float:
    t0 = time.perf_counter()
    async with session.post(url + "/v1/completions", json={"model": "refmodel", "stream": True, **body}) as r:
        assert r.status == 200, await r.text()
        await r.read()
    return (time.perf_counter() - t0) * 1e3


def v2_input(shape: tuple[int, int] = (1, 4)) -> thttp.InferInput:
    inp = thttp.InferInput("INPUT0", list(shape), "FP32")
    inp.set_data_from_numpy(np.ones(shape, dtype=np.float32))
    return inp


def test_knobs_are_off_by_default_and_the_cli_sets_them() -> None:
    cfg = RefServerConfig()
    assert (cfg.batch_max_size, cfg.kv_blocks, cfg.priority, cfg.instances) == (1, 0, "fifo", 1)
    assert (cfg.http_codec_ms, cfg.grpc_codec_ms, cfg.shape_penalty_ms) == (0, 0, 0)
    args = build_parser().parse_args(
        [
            "--batch-max-size",
            "8",
            "--batch-delay-ms",
            "20",
            "--kv-blocks",
            "64",
            "--kv-fragmentation",
            "0.5",
            "--priority",
            "strict",
            "--instances",
            "4",
            "--instance-weights",
            "8,1,1,1",
            "--http-codec-ms",
            "3",
            "--shape-penalty-ms",
            "50",
            "--shape-bucket-tokens",
            "16",
        ]
    )
    cfg = config_from_args(args)
    assert cfg.batch_max_size == 8 and cfg.kv_fragmentation == 0.5 and cfg.instance_weights == (8, 1, 1, 1)
    assert cfg.priority == "strict" and cfg.shape_bucket_tokens == 16 and cfg.http_codec_ms == 3
    with pytest.raises(ValueError, match="one weight per instance"):
        RefServerConfig(instances=2, instance_weights=(1.0,))
    bad = subprocess.run(
        [sys.executable, "-m", "mcp_refserver", "--instances", "2", "--instance-weights", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "instance_weights" in bad.stderr


async def test_default_exposition_has_no_trap_families() -> None:
    async with await start_refserver(RefServerConfig()) as srv, aiohttp.ClientSession() as s:
        fams = await metrics(s, srv.url)
    # the traffic counters (requests, connections) are no trap's: always there
    traffic = ("mcp_refserver_http_requests", "mcp_refserver_http_connections")
    ours = [n for n in fams if n.startswith("mcp_refserver_") or n == "vllm:cache_config_info"]
    assert set(traffic) <= set(ours), ours
    assert [n for n in ours if not n.startswith(traffic)] == []


async def test_strict_priority_gate_serves_the_low_number_first() -> None:
    gate = FifoGate(1, strict=True)
    order: list[str] = []

    async def worker(name: str, prio: int) -> None:
        await gate.acquire(prio)
        order.append(name)
        gate.release()

    await gate.acquire()
    tasks = [
        asyncio.create_task(worker(n, p)) for n, p in (("low1", 10), ("high1", 0), ("low2", 10), ("high2", 0))
    ]
    await asyncio.sleep(0)
    tasks[2].cancel()  # a cancelled waiter leaves the heap
    await asyncio.sleep(0)
    assert gate.waiting == 3
    gate.release()
    await asyncio.gather(*(t for i, t in enumerate(tasks) if i != 2))
    assert order == ["high1", "high2", "low1"]
    assert (gate.running, gate.waiting) == (0, 0)


async def test_dynamic_batcher_holds_requests_and_counts_one_execution_per_batch() -> None:
    cfg = RefServerConfig(infer_ms=1, batch_max_size=4, batch_delay_ms=30)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        client = thttp.InferenceServerClient(srv.url.removeprefix("http://"))
        try:
            t0 = time.perf_counter()
            await client.infer("refmodel", [v2_input()])  # alone: waits the whole delay
            alone_ms = (time.perf_counter() - t0) * 1e3
            await asyncio.gather(*(client.infer("refmodel", [v2_input()]) for _ in range(4)))  # fills a batch
        finally:
            await client.close()
        st = await stats(s, srv.url)
    assert alone_ms >= 30
    assert st["inference_count"] == 5 and st["execution_count"] == 2
    queue = st["inference_stats"]["queue"]
    assert queue["ns"] / queue["count"] > 5e6  # the lone request's 30 ms dominate the mean


async def test_kv_cache_preempts_below_full_usage_with_fragmentation() -> None:
    # 40 blocks of 4 tokens, only 20 usable: 8 streams of 4 + 24 tokens need 7 blocks each at the end
    cfg = RefServerConfig(ttft_ms=2, tpot_ms=1, kv_blocks=40, kv_block_tokens=4, kv_fragmentation=0.5)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        await asyncio.gather(*(completion(s, srv.url, prompt="a b c d", max_tokens=24) for _ in range(8)))
        fams = await metrics(s, srv.url)
        assert srv.model.kv is not None and srv.model.kv.used == 0  # every block given back
        preempted = srv.model.kv.preemptions
    assert preempted > 0
    assert fams["vllm:num_preemptions"].samples[0].value == preempted
    info = fams["vllm:cache_config_info"].samples[0].labels
    assert info["block_size"] == "4" and info["num_gpu_blocks"] == "40"
    assert fams["vllm:kv_cache_usage_perc"].samples[0].value == 0.0


async def test_kv_cache_without_pressure_never_preempts() -> None:
    cfg = RefServerConfig(ttft_ms=2, tpot_ms=1, kv_blocks=4096, kv_block_tokens=4)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        await asyncio.gather(*(completion(s, srv.url, prompt="a b c d", max_tokens=24) for _ in range(8)))
        assert srv.model.kv is not None and srv.model.kv.preemptions == 0
        async with s.post(
            srv.url + "/v1/completions", json={"model": "refmodel", "prompt": "a", "max_tokens": 20000}
        ) as r:
            assert r.status == 400  # could never fit: refused, not left waiting forever


async def test_unfair_instances_busy_counters_and_gpu_gauges() -> None:
    cfg = RefServerConfig(ttft_ms=3, tpot_ms=1, capacity=1, instances=3, instance_weights=(1, 0, 0))
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        await asyncio.gather(*(completion(s, srv.url, prompt="a", max_tokens=3) for _ in range(6)))
        fams = await metrics(s, srv.url)
    busy = {
        x.labels["instance"]: x.value
        for x in fams["mcp_refserver_instance_busy_seconds"].samples
        if x.name.endswith("_total")
    }
    assert busy["0"] > 0.02 and busy["1"] == busy["2"] == 0.0
    util = {x.labels["gpu_uuid"]: x.value for x in fams["nv_gpu_utilization"].samples}
    assert set(util) == {
        "GPU-simulated-refserver-0",
        "GPU-simulated-refserver-1",
        "GPU-simulated-refserver-2",
    }
    assert util["GPU-simulated-refserver-0"] > 0 and util["GPU-simulated-refserver-1"] == 0.0


async def test_codec_time_is_compute_input_and_output() -> None:
    cfg = RefServerConfig(infer_ms=1, http_codec_ms=4, grpc_port=0)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        client = thttp.InferenceServerClient(srv.url.removeprefix("http://"))
        assert srv.grpc_url is not None
        grpc_client = tgrpc.InferenceServerClient(srv.grpc_url)
        try:
            await client.infer("refmodel", [v2_input()])
            before = await stats(s, srv.url)
            g = tgrpc.InferInput("INPUT0", [1, 4], "FP32")
            g.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
            await grpc_client.infer("refmodel", [g])  # gRPC: no codec knob set
        finally:
            await client.close()
            await grpc_client.close()
        after = await stats(s, srv.url)
    inf = before["inference_stats"]
    assert inf["compute_input"]["ns"] == pytest.approx(2e6, rel=0.01) and inf["compute_output"]["count"] == 1
    assert inf["compute_infer"]["ns"] >= 1e6
    assert after["inference_stats"]["compute_input"] == inf["compute_input"]  # unchanged by gRPC


async def test_first_request_of_each_shape_pays_the_compile() -> None:
    # a penalty far above what a busy host adds to a 4 ms request, so only the compile tells them apart
    cfg = RefServerConfig(ttft_ms=2, tpot_ms=1, shape_penalty_ms=300, shape_bucket_tokens=4)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        first = await completion(s, srv.url, prompt="a b c", max_tokens=2)  # bucket 4
        warm = await completion(s, srv.url, prompt="a b", max_tokens=2)  # same bucket
        both = await asyncio.gather(
            *(completion(s, srv.url, prompt="a b c d e", max_tokens=2) for _ in range(2))
        )
        fams = await metrics(s, srv.url)
    assert first >= 300 and warm < 150
    assert min(both) >= 300  # the second request of a new shape waits for the same compile
    assert fams["mcp_refserver_shape_compiles"].samples[0].value == 2
