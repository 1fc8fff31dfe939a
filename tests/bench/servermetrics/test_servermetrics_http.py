"""Probes against real HTTP servers on loopback: the reference server and a prometheus_client exporter."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import Counter

from mcp_bench.records import ErrorKind
from mcp_bench.servermetrics import (
    PrometheusEndpointProbe,
    ServerMetricsProbe,
    TritonStatsProbe,
    deltas,
    snapshot_all,
    triton_probe,
    vllm_probe,
)
from mcp_refserver import RefServerConfig, start_refserver

N = 6
MAX_TOKENS = 4


async def test_exporter_counter_delta_over_http(jobs_exporter: tuple[int, Counter]) -> None:
    port, counter = jobs_exporter
    probe = PrometheusEndpointProbe(f"http://127.0.0.1:{port}/metrics", expected=("jobs_total",))
    counter.inc(2)
    before = await probe.snapshot()
    counter.inc(5)
    after = await probe.snapshot()
    out = probe.delta(before, after)
    assert out["status"] == "ok" and out["missing"] == []
    assert out["metrics"]["jobs_total"]["total_delta"] == 5.0
    assert out["interval_s"] > 0


async def test_refserver_metrics_and_stats_deltas_match_the_requests_sent() -> None:
    cfg = RefServerConfig.model_validate(
        {"ttft_ms": 2, "tpot_ms": 1, "infer_ms": 1, "default_max_tokens": MAX_TOKENS}
    )
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as session:
        probes: list[ServerMetricsProbe] = [
            triton_probe(srv.url),
            vllm_probe(srv.url),
            TritonStatsProbe(srv.url, cfg.model),
        ]
        before = await snapshot_all(probes)
        for _ in range(N):
            async with session.post(
                srv.url + "/v1/completions", json={"model": cfg.model, "prompt": "a b"}
            ) as r:
                assert r.status == 200
                await r.read()
        after = await snapshot_all(probes)
    level = deltas(probes, before, after)

    triton = level["triton-metrics"]
    assert triton["status"] == "ok" and triton["missing"] == []
    assert triton["metrics"]["nv_inference_request_success"]["total_delta"] == N
    assert triton["metrics"]["nv_inference_request_failure"]["total_delta"] == 0
    util = triton["metrics"]["nv_gpu_utilization"]["series"][0]
    assert util["before"] == util["after"] == util["max"] == cfg.gpu_utilization

    vllm = level["vllm-metrics"]
    assert vllm["missing"] == []
    assert vllm["metrics"]["vllm:generation_tokens_total"]["total_delta"] == N * MAX_TOKENS
    ttft = vllm["metrics"]["vllm:time_to_first_token_seconds"]["series"][0]
    assert ttft["count"] == N
    assert ttft["mean"] >= 0.002  # modelled TTFT is 2 ms; the server cannot answer sooner
    assert 0.001 <= ttft["p50"] <= 0.01  # vLLM buckets: the rank lies in (1 ms, 5 ms] or (5, 10]
    assert vllm["metrics"]["vllm:num_requests_waiting"]["series"][0]["max"] == 0.0

    stats = level[f"triton-stats:{cfg.model}"]
    assert stats["status"] == "ok"
    stages = stats["stages"][f"{cfg.model}/{cfg.model_version}"]
    assert stages["success"]["count"] == N
    # The stats extension and the metrics endpoint describe the same requests.
    queue_us = triton["metrics"]["nv_inference_queue_duration_us"]["total_delta"]
    assert stages["queue"]["total_ms"] == pytest.approx(queue_us / 1e3, abs=0.01)


async def test_unreachable_server_is_a_connect_error_and_the_delta_unavailable(closed_port: int) -> None:
    probe = PrometheusEndpointProbe(f"http://127.0.0.1:{closed_port}/metrics", timeout_s=2)
    before, after = await probe.snapshot(), await probe.snapshot()
    assert before.error_kind == ErrorKind.CONNECT and before.families == {}
    out = probe.delta(before, after)
    assert out["status"] == "unavailable" and "connect" in out["reason"]


async def test_http_error_and_malformed_bodies_are_counted_by_kind(
    jobs_exporter: tuple[int, Counter],
) -> None:
    async with await start_refserver(RefServerConfig()) as srv:
        missing = await PrometheusEndpointProbe(srv.url + "/no-such-path").snapshot()
        assert missing.error_kind == ErrorKind.HTTP_STATUS and "404" in missing.error
        no_model = await TritonStatsProbe(srv.url, "no-such-model").snapshot()
        assert no_model.error_kind == ErrorKind.HTTP_STATUS
        # The stats endpoint answers JSON, which is not Prometheus text.
        not_text = await PrometheusEndpointProbe(srv.url + "/v2/models/refmodel/stats").snapshot()
        assert not_text.error_kind == ErrorKind.MALFORMED and not_text.families == {}
    # prometheus_client's exporter answers its text on every path: not the stats extension's JSON.
    not_json = await TritonStatsProbe(f"http://127.0.0.1:{jobs_exporter[0]}", "m").snapshot()
    assert not_json.error_kind == ErrorKind.MALFORMED
