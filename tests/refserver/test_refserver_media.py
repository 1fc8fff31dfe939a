"""The reference server takes images: chat image_url parts (base64 PNG/JPEG or links) and V2
image tensors, counts them per front end, charges image_ms per image, and refuses image data
that is not an image."""

from __future__ import annotations

import base64
import random
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_bench.multimodal import ImageTensor, jpeg_bytes, png_bytes, tensor_pool
from mcp_bench.protocols.triton import TritonClient
from mcp_bench.records import RequestPayload
from mcp_refserver import RefServerConfig, start_refserver
from mcp_refserver.media import counts_of


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def chat(parts: list[dict[str, object]]) -> dict[str, object]:
    return {
        "model": "refmodel",
        "max_tokens": 2,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"}, *parts]}],
    }


def image(url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url}}


async def test_chat_image_parts_are_decoded_counted_and_not_words() -> None:
    png = png_bytes(20, 10, random.Random(1))
    jpg = jpeg_bytes(16, 16, random.Random(2))
    parts = [image(data_url("image/png", png)), image(data_url("image/jpeg", jpg)), image("https://x/a.png")]
    async with (
        await start_refserver(RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1})) as srv,
        aiohttp.ClientSession() as s,
    ):
        async with s.post(srv.url + "/v1/chat/completions", json=chat(parts)) as r:
            assert r.status == 200
            assert (await r.json())["usage"]["prompt_tokens"] == 3  # the text's words only
        async with s.get(srv.url + "/debug/media") as r:
            media = await r.json()
        async with s.get(srv.url + "/metrics") as r:
            families = {f.name: f for f in text_string_to_metric_families(await r.text())}
    assert media == {
        "requests": {"openai": 1},
        "images": {"openai": 3},
        "bytes": {"openai": len(png) + len(jpg)},
        "formats": {"png": 1, "jpeg": 1, "url": 1},
    }
    [sample] = [x for x in families["mcp_refserver_images"].samples if x.name.endswith("_total")]
    assert sample.labels == {"front": "openai"} and sample.value == 3


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("data:image/png;base64,@@@", "not base64"),
        (data_url("image/png", b"GIF89a......"), "neither PNG nor JPEG"),
        ("data:image/png,rawbytes", "must be base64"),
        ("ftp://x/y.png", "data: URL or an http"),
    ],
)
async def test_bad_image_parts_are_refused_and_not_counted(url: str, message: str) -> None:
    async with (
        await start_refserver(RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1})) as srv,
        aiohttp.ClientSession() as s,
    ):
        async with s.post(srv.url + "/v1/chat/completions", json=chat([image(url)])) as r:
            assert r.status == 400
            assert message in (await r.json())["error"]["message"]
        assert counts_of(srv.model).images == {}


async def test_image_ms_is_charged_per_image_before_the_first_token() -> None:
    png = data_url("image/png", png_bytes(4, 4, random.Random(0)))
    config = RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1, "image_ms": 40})
    async with await start_refserver(config) as srv, aiohttp.ClientSession() as s:
        took = {}
        for n in (0, 3):
            start = time.perf_counter()
            async with s.post(srv.url + "/v1/chat/completions", json=chat([image(png)] * n)) as r:
                assert r.status == 200
                await r.read()
            took[n] = time.perf_counter() - start
    assert took[3] >= 0.120  # 3 x 40 ms
    assert took[0] < 0.100


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_v2_image_tensors_from_the_bench_client_are_counted_and_charged(use_grpc: bool) -> None:
    spec = ImageTensor(shape=[3, 8, 8], datatype="UINT8", batch=2, pool_size=1)
    [tensor] = tensor_pool(spec)
    config = RefServerConfig.model_validate({"infer_ms": 1, "image_ms": 25, "grpc_port": 0})
    async with await start_refserver(config) as srv:
        url = srv.grpc_url if use_grpc else srv.url
        assert url is not None
        client = TritonClient(url, "refmodel", use_grpc=use_grpc)
        await client.open()
        try:
            plain = await client.send(RequestPayload())
            with_images = [await client.send(RequestPayload(tensors=[tensor])) for _ in range(2)]
        finally:
            await client.close()
        counts = counts_of(srv.model)
    assert plain.ok and all(r.ok for r in with_images), [r.error_detail for r in with_images]
    assert counts.images == {"v2": 4} and counts.requests == {"v2": 2}
    assert counts.bytes == {"v2": 2 * 2 * 3 * 8 * 8}
    assert all(r.e2e_ns >= 50e6 for r in with_images)  # 2 images x 25 ms each
    assert plain.e2e_ns < 40e6
