"""The reference server's endpoints: OpenAI (non-stream), V2 HTTP and gRPC, stats, /metrics, CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import aiohttp
import numpy as np
import pytest
import tritonclient.grpc.aio as tgrpc
import tritonclient.http.aio as thttp
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from mcp_refserver import Faults, RefServerConfig, start_refserver

REFSERVER = [sys.executable, "-m", "mcp_refserver"]
FAST = RefServerConfig(ttft_ms=1, tpot_ms=1, infer_ms=1, grpc_port=0)


async def get_json(session: aiohttp.ClientSession, url: str) -> tuple[int, object]:
    async with session.get(url) as r:
        return r.status, await r.json(content_type=None)


async def test_identity_endpoints() -> None:
    async with await start_refserver(FAST) as srv, aiohttp.ClientSession() as s:
        assert srv.url.startswith("http://127.0.0.1:")
        assert await get_json(s, srv.url + "/version") == (200, {"version": "0.1.0", "name": "mcp-refserver"})
        status, models = await get_json(s, srv.url + "/v1/models")
        assert status == 200 and models["data"][0]["id"] == "refmodel"  # type: ignore[index]
        async with s.get(srv.url + "/health") as r:
            assert r.status == 200 and r.headers["Server"] == "mcp-refserver/0.1.0"
        status, meta = await get_json(s, srv.url + "/v2")
        extensions = ["binary_tensor_data", "statistics"]
        assert meta == {"name": "mcp-refserver", "version": "0.1.0", "extensions": extensions}
        for path, code in [
            ("/v2/health/live", 200),
            ("/v2/health/ready", 200),
            ("/v2/models/refmodel/ready", 200),
            ("/v2/models/other/ready", 400),
            ("/v2/models/other", 404),
        ]:
            async with s.get(srv.url + path) as r:
                assert r.status == code, path


@pytest.mark.parametrize("chat", [False, True])
async def test_non_streaming_completion_has_usage(chat: bool) -> None:
    async with await start_refserver(FAST) as srv, aiohttp.ClientSession() as s:
        body: dict[str, object] = {"model": "refmodel", "max_tokens": 4}
        if chat:
            body["messages"] = [{"role": "user", "content": "a b c"}]
        else:
            body["prompt"] = "a b c"
        path = "/v1/chat/completions" if chat else "/v1/completions"
        async with s.post(srv.url + path, json=body) as r:
            doc = await r.json()
        assert doc["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
        text = doc["choices"][0]["message"]["content"] if chat else doc["choices"][0]["text"]
        assert text.split() == ["tok0", "tok1", "tok2", "tok3"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "nope", "prompt": "x"}, 404, "does not exist"),
        ({"model": "refmodel", "prompt": 5}, 400, "'prompt' must be"),
        ({"model": "refmodel", "prompt": "x", "max_tokens": 0}, 400, "'max_tokens' must be"),
    ],
)
async def test_bad_openai_requests_get_clear_errors(
    body: dict[str, object], status: int, message: str
) -> None:
    async with await start_refserver(FAST) as srv, aiohttp.ClientSession() as s:
        async with s.post(srv.url + "/v1/completions", json=body) as r:
            assert r.status == status
            assert message in (await r.json())["error"]["message"]
        async with s.post(srv.url + "/v1/completions", data=b"{broken") as r:
            assert r.status == 400


@pytest.mark.parametrize("binary", [True, False])
async def test_v2_http_infer_echoes_and_sums(binary: bool) -> None:
    async with await start_refserver(FAST) as srv:
        client = thttp.InferenceServerClient(srv.url.removeprefix("http://"))
        try:
            x = np.arange(12, dtype=np.float32).reshape(3, 4)
            inp = thttp.InferInput("INPUT0", [3, 4], "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            outs = [thttp.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")]
            res = await client.infer("refmodel", [inp], outputs=outs)
            np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), x)
            np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), np.array([66.0], dtype=np.float32))
            with pytest.raises(InferenceServerException, match="unknown model"):
                await client.infer("other", [inp])
        finally:
            await client.close()


async def test_v2_grpc_infer_metadata_and_stats() -> None:
    async with await start_refserver(FAST) as srv:
        assert srv.grpc_url is not None
        client = tgrpc.InferenceServerClient(srv.grpc_url)
        try:
            assert await client.is_server_live() and await client.is_model_ready("refmodel")
            meta = await client.get_server_metadata(as_json=True)
            assert (meta["name"], meta["version"]) == ("mcp-refserver", "0.1.0")
            mm = await client.get_model_metadata("refmodel", as_json=True)
            assert mm["inputs"][0]["name"] == "INPUT0"
            x = np.array([[1.5, 2.5]], dtype=np.float32)
            inp = tgrpc.InferInput("INPUT0", [1, 2], "FP32")
            inp.set_data_from_numpy(x)
            for _ in range(3):
                res = await client.infer("refmodel", [inp])
            np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), x)
            assert res.as_numpy("OUTPUT1").tolist() == [4.0]
            stats = await client.get_inference_statistics("refmodel", as_json=True)
            s = stats["model_stats"][0]
            assert int(s["inference_count"]) == 3
            assert int(s["inference_stats"]["success"]["count"]) == 3
            assert int(s["inference_stats"]["compute_infer"]["ns"]) >= 3 * 1_000_000  # 1 ms modelled each
        finally:
            await client.close()


def metric_values(text: str) -> dict[str, float]:
    """Sample name -> value (summed over label sets), parsed by prometheus_client. Its parser names
    counter samples ``<family>_total`` even where the text (as Triton's) has no suffix."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            suffixed = fam.name.startswith("nv_") and sample.name == fam.name + "_total"
            name = fam.name if suffixed else sample.name
            out[name] = out.get(name, 0.0) + sample.value
    return out


async def test_stats_and_metrics_count_the_same_requests() -> None:
    cfg = RefServerConfig(ttft_ms=1, tpot_ms=1, default_max_tokens=5, faults=Faults(error_rate=0.3), seed=4)
    async with await start_refserver(cfg) as srv, aiohttp.ClientSession() as s:
        codes = []
        for _ in range(20):
            async with s.post(srv.url + "/v1/completions", json={"model": "refmodel", "prompt": "a b"}) as r:
                codes.append(r.status)
        ok, failed = codes.count(200), codes.count(500)
        assert ok + failed == 20 and 0 < failed < 20
        _, stats = await get_json(s, srv.url + "/v2/models/refmodel/stats")
        inf = stats["model_stats"][0]["inference_stats"]  # type: ignore[index]
        assert (inf["success"]["count"], inf["fail"]["count"]) == (ok, failed)
        async with s.get(srv.url + "/metrics") as r:
            text = await r.text()
        for name in ("nv_inference_request_success", "nv_inference_count", "nv_gpu_utilization"):
            assert f"# TYPE {name} " in text  # Triton's names, no _total suffix
        m = metric_values(text)
        assert m["nv_inference_request_success"] == ok
        assert m["nv_inference_request_failure"] == failed
        assert m["nv_inference_queue_duration_us"] == inf["queue"]["ns"] // 1000
        assert m["nv_inference_compute_infer_duration_us"] == inf["compute_infer"]["ns"] // 1000
        assert m["nv_gpu_memory_used_bytes"] == cfg.gpu_memory_used_bytes
        assert m["vllm:generation_tokens_total"] == 5 * ok
        assert m["vllm:prompt_tokens_total"] == 2 * ok
        assert m["vllm:time_to_first_token_seconds_count"] == ok
        assert m["vllm:e2e_request_latency_seconds_count"] == ok
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
            assert m[name] == 0.0
        assert m["vllm:num_preemptions_total"] == 0.0


async def test_delay_endpoint() -> None:
    async with await start_refserver(FAST) as srv, aiohttp.ClientSession() as s:
        async with s.get(srv.url + "/delay?ms=1&bytes=7") as r:
            assert r.status == 200 and await r.read() == b"xxxxxxx"
        async with s.get(srv.url + "/delay?ms=-1") as r:
            assert r.status == 400


def test_cli_prints_ports_then_serves() -> None:
    proc = subprocess.Popen(
        [*REFSERVER, "--port", "0", "--grpc-port", "0", "--ttft-ms", "uniform:1:2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        grpc_port = int(proc.stdout.readline())
        assert port > 0 and grpc_port > 0 and port != grpc_port

        async def probe() -> object:
            async with aiohttp.ClientSession() as s:
                return (await get_json(s, f"http://127.0.0.1:{port}/version"))[1]

        assert asyncio.run(probe()) == {"version": "0.1.0", "name": "mcp-refserver"}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0


def test_cli_rejects_bad_values_with_field_path() -> None:
    res = subprocess.run(
        [*REFSERVER, "--port", "0", "--error-rate", "2", "--tpot-ms", "uniform:9:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "faults.error_rate" in res.stderr and "tpot_ms" in res.stderr
